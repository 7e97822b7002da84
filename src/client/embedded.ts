// The package entry `gov-gateway/embedded`: the gateway in the host process. It loads the server, which is
// why it is not part of `gov-gateway/client`.
export { startEmbeddedGateway, type EmbeddedGateway, type EmbeddedGatewayOptions } from './embedded-gateway.js';
