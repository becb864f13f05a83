/**
 * The `/goal` grammar (docs/DESIGN.md §6), as a pure parser:
 *   /goal <text>                          set the standing goal and start a turn
 *   /goal status | pause | resume | clear (the whole argument)
 * @throws ScheduleInputError for an over-long goal
 */
import { takeEconomyFlags, type ScheduleEconomy } from '../economy/economy-flags.ts';
import { ScheduleInputError } from '../errors/schedule-input-error.ts';
import { nameTable } from '../names/name-table.ts';

export type GoalCommand =
  { action: 'status' | 'pause' | 'resume' | 'clear' | 'help' } | { action: 'set'; text: string; economy: ScheduleEconomy };

const CONTROL = nameTable<'status' | 'pause' | 'resume' | 'clear' | 'help'>({
  '': 'status',
  status: 'status',
  pause: 'pause',
  resume: 'resume',
  clear: 'clear',
  stop: 'clear',
  cancel: 'clear',
  help: 'help',
});

/** Parse the argument text of `/goal` (see the grammar above). @throws ScheduleInputError for an over-long goal */
export function parseGoalArgs(argText: string, options: { maxPromptChars: number }): GoalCommand {
  const text = argText.trim();
  const control = CONTROL[text.toLowerCase()];
  if (control) return { action: control };
  const { economy, rest } = takeEconomyFlags(text.split(/\s+/), { notify: false });
  if (economy.watch)
    throw new ScheduleInputError('--watch is for loops, heartbeats and cron jobs; a goal has no schedule to watch for.', {
      field: 'watch',
    });
  const goal = rest.join(' ').trim();
  if (!goal) throw new ScheduleInputError('/goal needs a goal, e.g. /goal get the test suite green.', { field: 'goal' });
  if (goal.length > options.maxPromptChars) {
    throw new ScheduleInputError(`The goal is ${goal.length} characters; the limit is ${options.maxPromptChars}.`, { field: 'goal' });
  }
  // Without flags the text is kept as typed (its own spacing).
  return { action: 'set', text: Object.keys(economy).length ? goal : text, economy };
}

export const GOAL_HELP = [
  'Usage: /goal <what should be true when done> [--max-tokens N] [--model <name>]   (a standing goal; the agent keeps working toward it)',
  'Control: /goal status | pause | resume | clear',
].join('\n');
