// The package entry `gov-gateway/client`. Everything reachable from here must stay free of server
// dependencies (test/client/import-graph.test.ts): the embedded gateway is its own entry.
export { GovClient, isLocalDecision, ENV_KILL_SWITCH_REASON } from './gov-client.js';
export type { ValidateInput, PreCheckInput, PostCheckInput, ValidateResponse, PreCheckResponse, PostCheckResponse, KillSwitchSet, KillSwitchState } from './gov-client.js';
export { govern, governed, type GovernOptions, type Governed } from './govern.js';
export { SDK_VERSION, DEFAULT_GATEWAY_URL, ClientSettingsError, defaultQueueDir, type GovClientOptions, type FailureMode } from './client-settings.js';
export { BlockedError, GatewayUnavailableError, GatewayVersionError, GatewayRequestError, QueueFullError, LOCAL_ENVELOPE_ID } from '../contracts/client-errors.js';
