/**
 * `hermes completion bash|zsh|fish`: a shell completion script generated from
 * the commander tree itself, so every command, alias and long option that
 * exists is completed and nothing else. Static (no `hermes` process per Tab).
 *
 *   bash: eval "$(hermes completion bash)"          (e.g. in ~/.bashrc)
 *   zsh:  eval "$(hermes completion zsh)"           (e.g. in ~/.zshrc)
 *   fish: hermes completion fish > ~/.config/fish/completions/hermes.fish
 */
import { type Command } from 'commander';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';
import { action } from '../run-command.ts';
import { writeOut } from '../terminal-text.ts';

/** The shells a script can be generated for. */
export const COMPLETION_SHELLS = ['bash', 'zsh', 'fish'] as const;
export type CompletionShell = (typeof COMPLETION_SHELLS)[number];

/** One command of the tree: its path of names from the root, subcommand names (with aliases) and long options. */
export interface CompletionNode {
  path: string[];
  subcommands: string[];
  options: string[];
}

/** Flatten the commander tree below `root` (pure). */
export function completionTree(root: Command): CompletionNode[] {
  const nodes: CompletionNode[] = [];
  const visit = (cmd: Command, path: string[]) => {
    const subs = cmd.commands.filter((c) => !(c as unknown as { _hidden?: boolean })._hidden);
    const options = cmd.options.map((o) => o.long).filter((l): l is string => typeof l === 'string');
    if (subs.length > 0 || path.length > 0) options.push('--help');
    nodes.push({ path, subcommands: subs.flatMap((c) => [c.name(), ...c.aliases()]), options: [...new Set(options)] });
    for (const c of subs) for (const name of [c.name(), ...c.aliases()]) visit(c, [...path, name]);
  };
  visit(root, []);
  return nodes;
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The completion script for `shell`.
 * @throws ScheduleInputError for an unknown shell
 */
export function completionScript(root: Command, shell: string): string {
  const nodes = completionTree(root);
  const name = root.name();
  const fn = `_${name.replace(/[^A-Za-z0-9_]/g, '_')}_complete`;
  // Shared by bash and zsh: a case over the path of subcommands typed so far.
  const cases = (indent: string) =>
    nodes
      .map((n) => `${indent}${quote(n.path.join(' '))}) subs=${quote(n.subcommands.join(' '))}; opts=${quote(n.options.join(' '))} ;;`)
      .join('\n');
  const walk = (first: string, last: string, word: string) => [
    `  local path="" subs="" opts="" i w`,
    `  for ((i=${first}; i<${last}; i++)); do`,
    `    w=${word}`,
    `    __${fn}_node "$path"`,
    `    case " $subs " in *" $w "*) path="\${path:+$path }$w" ;; esac`,
    `  done`,
    `  __${fn}_node "$path"`,
  ];
  const node = [`__${fn}_node() {`, `  case "$1" in`, cases('    '), `    *) subs=""; opts="" ;;`, `  esac`, `}`];
  switch (shell) {
    case 'bash':
      return [
        `# bash completion for ${name}; load with: eval "$(${name} completion bash)"`,
        ...node,
        `${fn}() {`,
        ...walk('1', 'COMP_CWORD', '"${COMP_WORDS[i]}"'),
        `  local cur="\${COMP_WORDS[COMP_CWORD]}"`,
        `  if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "$opts" -- "$cur")); else COMPREPLY=($(compgen -W "$subs" -- "$cur")); fi`,
        `}`,
        `complete -o default -F ${fn} ${name}`,
        '',
      ].join('\n');
    case 'zsh':
      return [
        `#compdef ${name}`,
        `# zsh completion for ${name}; load with: eval "$(${name} completion zsh)"`,
        ...node,
        `${fn}() {`,
        ...walk('2', 'CURRENT', '"${words[i]}"'),
        `  if [[ "\${words[CURRENT]}" == -* ]]; then compadd -- \${=opts}; else compadd -- \${=subs}; fi`,
        `}`,
        `compdef ${fn} ${name}`,
        '',
      ].join('\n');
    case 'fish': {
      const lines = [`# fish completion for ${name}; save as ~/.config/fish/completions/${name}.fish`, `complete -c ${name} -f`];
      for (const n of nodes) {
        // The condition: exactly this path of subcommands has been typed.
        const cond =
          n.path.length === 0
            ? '__fish_use_subcommand'
            : `__fish_seen_subcommand_from ${n.path[n.path.length - 1]}${n.path.length > 1 ? `; and __fish_seen_subcommand_from ${n.path[0]}` : ''}`;
        if (n.subcommands.length > 0) lines.push(`complete -c ${name} -n ${quote(cond)} -a ${quote(n.subcommands.join(' '))}`);
        for (const o of n.options) lines.push(`complete -c ${name} -n ${quote(cond)} -l ${o.replace(/^--/, '')}`);
      }
      return `${lines.join('\n')}\n`;
    }
    default:
      throw new ScheduleInputError(`Unknown shell "${shell}": use ${COMPLETION_SHELLS.join(', ')}.`, { field: 'shell' });
  }
}

/** Add `hermes completion <shell>` to `program` (call it after every other command is registered). */
export function registerCompletionCommand(program: Command): void {
  program
    .command('completion')
    .description(`print a shell completion script: ${COMPLETION_SHELLS.join(', ')} (e.g. eval "$(hermes completion bash)")`)
    .argument('<shell>', COMPLETION_SHELLS.join(' | '))
    .action(
      action(async (shell: string) => {
        writeOut(completionScript(program, shell));
      }),
    );
}
