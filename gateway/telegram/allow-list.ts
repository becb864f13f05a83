/**
 * Who may reach the agent through Telegram: the numeric user ids of
 * `TELEGRAM_ALLOWED_USERS` (`telegram.allowed_users`). An empty list allows
 * nobody — a bot token alone never opens the agent to the world.
 */
export class AllowList {
  private readonly ids: ReadonlySet<string>;

  constructor(userIds: readonly string[]) {
    this.ids = new Set(userIds.map((s) => s.trim()).filter((s) => /^\d+$/.test(s)));
  }

  /** Whether the Telegram user `userId` may reach the agent. */
  allows(userId: number | string): boolean {
    return this.ids.has(String(userId));
  }

  get size(): number {
    return this.ids.size;
  }
}
