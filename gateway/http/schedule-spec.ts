/**
 * What a loop or heartbeat set over HTTP asks for, checked before anything is written: `POST
 * /api/schedules` and the console's schedule form (gateway/console/) read their input here, so
 * both refuse the same input with the same words; `LoopService.set` then applies the rules every
 * surface shares (economy, targets, the surface's rights).
 */
import type { HermesConfig } from '../../scheduler/config/config.ts';
import type { ScheduleEconomy } from '../../scheduler/economy/economy-flags.ts';
import { parseLoopArgs } from '../../scheduler/loop/loop-command.ts';
import { parseLoopOverlap } from '../../scheduler/loop/loop-overlap.ts';
import type { LoopSpec } from '../../scheduler/loop/loop-service.ts';
import { HttpError } from './errors.ts';
import { ScheduleInputError } from '../../scheduler/errors/schedule-input-error.ts';

/**
 * A loop from the text after `/loop` (`5m check the CI build --times 3`); a flag in `args` wins
 * over the same setting in `economy`.
 * @throws ScheduleInputError for text the `/loop` grammar refuses; HttpError (400) for a control word
 */
export function loopSpecFromArgs(args: string, economy: ScheduleEconomy, config: HermesConfig): LoopSpec {
  const cmd = parseLoopArgs(args, {
    minIntervalSeconds: config.loops.min_interval_seconds,
    maxPromptChars: config.agent.max_prompt_chars,
  });
  if (cmd.action !== 'set') {
    throw new HttpError(
      400,
      `"${args}" is a control word; use the pause/resume/DELETE routes.`,
      'invalid_request_error',
      'not_a_schedule',
      'args',
    );
  }
  return { ...cmd, economy: { ...economy, ...cmd.economy } };
}

/**
 * A loop by its interval (`null`: self-paced) and prompt, as fields: the prompt is taken as written
 * (no `/loop` flags read in it). The interval is checked where it was read (`parseLoopInterval`).
 * @throws HttpError (400) for an empty prompt or one over `agent.max_prompt_chars`
 */
export function loopSpecFromFields(
  intervalSeconds: number | null,
  prompt: string,
  economy: ScheduleEconomy,
  config: HermesConfig,
): LoopSpec {
  if (prompt.trim() === '')
    throw new HttpError(400, 'A loop needs a prompt: what each tick asks.', 'invalid_request_error', 'prompt_missing', 'prompt');
  return { ...promptChecked(prompt.trim(), config), intervalSeconds, economy };
}

/** `prompt` within `agent.max_prompt_chars`, with the parts of a spec nothing here sets. @throws HttpError (400) */
function promptChecked(prompt: string, config: HermesConfig): Omit<LoopSpec, 'intervalSeconds'> {
  if (prompt.length > config.agent.max_prompt_chars) {
    throw new HttpError(
      400,
      `The prompt is ${prompt.length} characters; the limit is ${config.agent.max_prompt_chars}.`,
      'invalid_request_error',
      'prompt_too_long',
      'prompt',
    );
  }
  return { prompt, times: null, until: null, notes: [] };
}

/**
 * A heartbeat by its interval and prompt.
 * @throws HttpError (400) for an interval below `heartbeat.min_interval_seconds` or a prompt over `agent.max_prompt_chars`
 */
export function heartbeatSpec(intervalSeconds: number, prompt: string, economy: ScheduleEconomy, config: HermesConfig): LoopSpec {
  const min = config.heartbeat.min_interval_seconds;
  if (intervalSeconds < min) {
    throw new HttpError(
      400,
      `interval_seconds must be at least ${min} for a heartbeat.`,
      'invalid_request_error',
      'interval_too_small',
      'interval_seconds',
    );
  }
  if (prompt.trim() === '')
    throw new HttpError(400, 'A heartbeat needs a prompt: what each beat asks.', 'invalid_request_error', 'prompt_missing', 'prompt');
  return { ...promptChecked(prompt, config), intervalSeconds, economy };
}

/**
 * A loop's `overlap` given as a field (`POST /api/schedules`): the `--overlap` values and messages of `/loop`.
 * @throws ScheduleInputError (400) for another value, or for a self-paced loop (none of its ticks overlaps)
 */
export function withOverlap(spec: LoopSpec, value: string): LoopSpec {
  const overlap = parseLoopOverlap(value);
  if (spec.intervalSeconds === null) {
    throw new ScheduleInputError(
      "overlap is for loops with an interval: a self-paced loop's next tick is set when its tick ends, so none overlaps.",
      { field: 'overlap' },
    );
  }
  const { overlap: _given, ...rest } = spec;
  return overlap === 'queue' ? rest : { ...rest, overlap };
}
