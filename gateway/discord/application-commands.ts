/**
 * The bot's application commands (slash commands in Discord's own UI):
 * `/loop`, `/heartbeat`, `/goal`, `/stop`, `/status`, registered globally at
 * start (a bulk overwrite, so a restart never adds a second copy). An invoked
 * command becomes the same text a user would type (`/loop 10m check CI`), so
 * workers interpret it like any chat command — with the agent runner only:
 * chat input never creates a command turn.
 */
import {
  ApplicationCommandOptionType,
  ApplicationCommandType,
  type APIChatInputApplicationCommandInteraction,
  type API,
  type RESTPutAPIApplicationCommandsJSONBody,
} from '@discordjs/core';

/** The commands, as registered (one free-text option each where the command takes arguments). */
export const APPLICATION_COMMANDS: RESTPutAPIApplicationCommandsJSONBody = [
  {
    name: 'loop',
    type: ApplicationCommandType.ChatInput,
    description: 'A recurring task in this channel: /loop 10m check the build, or status | pause | resume | stop',
    options: [
      {
        name: 'args',
        description: 'interval and prompt (10m check the build), or status | pause | resume | stop',
        type: ApplicationCommandOptionType.String,
        required: false,
      },
    ],
  },
  {
    name: 'heartbeat',
    type: ApplicationCommandType.ChatInput,
    description: 'A regular check-in: /heartbeat every 30m anything new?',
    options: [
      {
        name: 'args',
        description: 'every <interval> <prompt>, or status | pause | resume | stop',
        type: ApplicationCommandOptionType.String,
        required: false,
      },
    ],
  },
  {
    name: 'goal',
    type: ApplicationCommandType.ChatInput,
    description: 'A standing goal the agent keeps working toward',
    options: [
      {
        name: 'text',
        description: 'the goal (or status | pause | resume | clear)',
        type: ApplicationCommandOptionType.String,
        required: false,
      },
    ],
  },
  { name: 'stop', type: ApplicationCommandType.ChatInput, description: 'Stop the schedules of this channel' },
  { name: 'status', type: ApplicationCommandType.ChatInput, description: 'The schedules of this channel' },
];

const NAMES = new Set(APPLICATION_COMMANDS.map((c) => c.name));

/**
 * The chat text of an invoked command (`/loop 10m check the build`), or
 * `undefined` for a command that is not one of ours.
 */
export function commandText(interaction: Pick<APIChatInputApplicationCommandInteraction, 'data'>): string | undefined {
  const { name, options } = interaction.data;
  if (!NAMES.has(name)) return undefined;
  const args = (options ?? [])
    .map((o) => ('value' in o && typeof o.value === 'string' ? o.value.trim() : ''))
    .filter((v) => v.length > 0)
    .join(' ');
  return args ? `/${name} ${args}` : `/${name}`;
}

/** Register the commands for the application (replacing any earlier set). */
export async function registerCommands(api: API, applicationId: string): Promise<void> {
  await api.applicationCommands.bulkOverwriteGlobalCommands(applicationId, APPLICATION_COMMANDS);
}
