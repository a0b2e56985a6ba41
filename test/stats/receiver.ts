// A webhook receiver the alert tests run on loopback (allowed for them by BERTH_ALERT_WEBHOOK_ALLOW):
// it records every request and answers with the statuses it is told, then 200.
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  path: string;
  // biome-ignore lint/suspicious/noExplicitAny: webhook bodies are arbitrary JSON.
  body: any;
}

export class Receiver {
  readonly received: Received[] = [];
  /** Statuses of the next answers (then 200). */
  readonly failures: number[] = [];
  private readonly server = http.createServer((req, res) => {
    let text = "";
    req.on("data", (c: Buffer) => {
      text += c.toString();
    });
    req.on("end", () => {
      this.received.push({ path: req.url ?? "", body: text ? JSON.parse(text) : undefined });
      res.statusCode = this.failures.shift() ?? 200;
      res.end("ok");
    });
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  of(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
