// The agent's end of a tunnel: every stream Berth opens is connected to the local engine's unix
// socket, or (when its OPEN frame names one) to another target the agent offers itself (its
// router's service); a target the agent does not offer is reset. Nothing else can be asked for.
import net from "node:net";
import { type MessageTransport, TunnelMux, type TunnelStream } from "./mux.ts";

/** Targets besides the engine, by the name an OPEN frame carries; each takes the stream. */
export type TunnelTargets = Record<string, (stream: TunnelStream) => void>;

export function forwardToEngineSocket(
  transport: MessageTransport,
  socketPath: string,
  targets: TunnelTargets = {},
): TunnelMux {
  return new TunnelMux(transport, {
    role: "acceptor",
    onStream(stream: TunnelStream, target: string) {
      if (target !== "") {
        const take = Object.hasOwn(targets, target) ? targets[target] : undefined;
        if (take) take(stream);
        else {
          // The reason crosses in the RESET frame; nobody here listens for the error.
          stream.on("error", () => {});
          stream.destroy(new Error(`this agent offers no ${target.replace(/[^\x20-\x7e]/g, "?")}`));
        }
        return;
      }
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
