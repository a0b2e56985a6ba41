// The agent's end of a tunnel: every stream Berth opens is connected to the local engine's unix
// socket, and to nothing else (the protocol carries no address, so none can be asked for).
import net from "node:net";
import { type MessageTransport, TunnelMux, type TunnelStream } from "./mux.ts";

export function forwardToEngineSocket(transport: MessageTransport, socketPath: string): TunnelMux {
  return new TunnelMux(transport, {
    role: "acceptor",
    onStream(stream: TunnelStream) {
      const engine = net.connect(socketPath);
      stream.pipe(engine);
      engine.pipe(stream);
      engine.on("error", (err) => stream.destroy(err));
      stream.on("error", () => engine.destroy());
      stream.on("close", () => {
        // After an orderly close both ways, let the engine socket flush what it still holds.
        if (stream.errored) engine.destroy();
        else engine.end();
      });
    },
  });
}
