export { HermesError, isHermesError } from './hermes-error.ts';
export { ScheduleInputError } from './schedule-input-error.ts';
export { UnknownJobError } from './unknown-job-error.ts';
export { StoreUnavailableError } from './store-unavailable-error.ts';
export { TurnError, type TurnFailureKind } from './turn-error.ts';
export { PlatformError } from './platform-error.ts';
export { ConfigError } from './config-error.ts';
export { ToolError, type ToolFailureKind } from './tool-error.ts';
export { UntrustedRedisError } from './untrusted-redis-error.ts';
