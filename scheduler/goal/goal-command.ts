/**
 * The `/goal` grammar (SPEC §6), as a pure parser:
 *   /goal <text>                          set the standing goal and start a turn
 *   /goal status | pause | resume | clear (the whole argument)
 * @throws ScheduleInputError for an over-long goal
 */
import { ScheduleInputError } from '../errors/schedule-input-error.ts';

export type GoalCommand = { action: 'status' | 'pause' | 'resume' | 'clear' | 'help' } | { action: 'set'; text: string };

const CONTROL: Record<string, 'status' | 'pause' | 'resume' | 'clear' | 'help'> = {
  '': 'status', status: 'status', pause: 'pause', resume: 'resume', clear: 'clear', stop: 'clear', cancel: 'clear', help: 'help',
};

/** Parse the argument text of `/goal` (see the grammar above). @throws ScheduleInputError for an over-long goal */
export function parseGoalArgs(argText: string, options: { maxPromptChars: number }): GoalCommand {
  const text = argText.trim();
  const control = CONTROL[text.toLowerCase()];
  if (control) return { action: control };
  if (text.length > options.maxPromptChars) {
    throw new ScheduleInputError(`The goal is ${text.length} characters; the limit is ${options.maxPromptChars}.`, { field: 'goal' });
  }
  return { action: 'set', text };
}

export const GOAL_HELP = [
  'Usage: /goal <what should be true when done>   (a standing goal; the agent keeps working toward it)',
  'Control: /goal status | pause | resume | clear',
].join('\n');
