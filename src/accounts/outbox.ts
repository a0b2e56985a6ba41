// The mail outbox: how confirmation messages leave Berth. SMTP when BERTH_SMTP_URL is set (a
// minimal client over node:net: EHLO, optional AUTH PLAIN, one message, QUIT); otherwise the
// message is written to the server log, where an operator can pick it up. Tests pass their own
// Outbox through PlatformOptions to read the messages.

import { randomBytes } from "node:crypto";
import net from "node:net";
import os from "node:os";

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

export interface Outbox {
  /** Resolves once the message is handed over; rejects with MailDeliveryError when it could not be. */
  send(message: MailMessage): Promise<void>;
}

export class MailDeliveryError extends Error {}

/** Writes each message to the server log (no mail server configured). */
export class LogOutbox implements Outbox {
  constructor(private readonly log: (line: string) => void) {}

  async send(m: MailMessage): Promise<void> {
    this.log(
      `mail to ${m.to} (no BERTH_SMTP_URL set, so it is logged instead of sent)\nSubject: ${m.subject}\n\n${m.text}`,
    );
  }
}

export interface SmtpOptions {
  /** smtp://[user:password@]host[:port] */
  url: string;
  from: string;
  /** Name sent in EHLO; the host name by default. */
  heloName?: string;
  timeoutMs?: number;
}

/** A header value must stay on one line, or it could add headers or end the message early. */
function oneLine(value: string, what: string): string {
  if (/[\r\n]/.test(value)) throw new MailDeliveryError(`${what} must not contain line breaks`);
  return value;
}

/** CRLF line endings, and a leading dot doubled (RFC 5321 §4.5.2) so no line ends the data. */
function dataLines(text: string): string {
  return text
    .replace(/\r?\n/g, "\r\n")
    .split("\r\n")
    .map((line) => (line.startsWith(".") ? `.${line}` : line))
    .join("\r\n");
}

/** Reads SMTP replies (possibly multi-line: `250-…` then `250 …`) from a socket. */
class ReplyReader {
  private buffer = "";
  private lines: string[] = [];
  private waiting?: { resolve(r: { code: number; text: string }): void; reject(e: Error): void };
  private failure?: Error;

  constructor(socket: net.Socket) {
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      this.buffer += chunk;
      let i = this.buffer.indexOf("\n");
      while (i !== -1) {
        this.lines.push(this.buffer.slice(0, i).replace(/\r$/, ""));
        this.buffer = this.buffer.slice(i + 1);
        i = this.buffer.indexOf("\n");
      }
      this.deliver();
    });
    const fail = (err: Error) => {
      this.failure ??= err;
      this.deliver();
    };
    socket.on("error", (err) => fail(new MailDeliveryError(`mail server connection failed: ${err.message}`)));
    socket.on("close", () => fail(new MailDeliveryError("the mail server closed the connection")));
  }

  next(): Promise<{ code: number; text: string }> {
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.deliver();
    });
  }

  private deliver(): void {
    if (!this.waiting) return;
    const end = this.lines.findIndex((l) => !/^\d{3}-/.test(l));
    if (end !== -1) {
      const reply = this.lines.splice(0, end + 1);
      const last = reply[reply.length - 1]!;
      const w = this.waiting;
      this.waiting = undefined;
      w.resolve({ code: Number(last.slice(0, 3)) || 0, text: reply.map((l) => l.slice(4)).join(" ") });
    } else if (this.failure) {
      const w = this.waiting;
      this.waiting = undefined;
      w.reject(this.failure);
    }
  }
}

export class SmtpOutbox implements Outbox {
  private readonly host: string;
  private readonly port: number;
  private readonly user?: string;
  private readonly password?: string;

  constructor(private readonly opts: SmtpOptions) {
    const u = new URL(opts.url);
    this.host = u.hostname.replace(/^\[|\]$/g, "");
    this.port = u.port ? Number(u.port) : 25;
    if (u.username) {
      this.user = decodeURIComponent(u.username);
      this.password = decodeURIComponent(u.password);
    }
  }

  async send(m: MailMessage): Promise<void> {
    const from = oneLine(this.opts.from, "the sender");
    const to = oneLine(m.to, "the recipient");
    const subject = oneLine(m.subject, "the subject");
    const socket = net.connect({ host: this.host, port: this.port });
    socket.setTimeout(this.opts.timeoutMs ?? 10_000, () =>
      socket.destroy(new Error(`no answer within ${this.opts.timeoutMs ?? 10_000} ms`)),
    );
    const replies = new ReplyReader(socket);
    const expect = async (command: string | undefined, ok: number[]) => {
      if (command !== undefined) socket.write(`${command}\r\n`);
      const r = await replies.next();
      if (!ok.includes(r.code)) {
        const what = command?.startsWith("AUTH") ? "AUTH PLAIN" : (command ?? "greeting");
        throw new MailDeliveryError(`the mail server refused ${what}: ${r.code} ${r.text}`);
      }
      return r;
    };
    try {
      await expect(undefined, [220]);
      const helo = this.opts.heloName ?? os.hostname();
      try {
        await expect(`EHLO ${helo}`, [250]);
      } catch (err) {
        if (!(err instanceof MailDeliveryError) || socket.destroyed) throw err;
        await expect(`HELO ${helo}`, [250]);
      }
      if (this.user !== undefined) {
        const plain = Buffer.from(`\0${this.user}\0${this.password ?? ""}`).toString("base64");
        await expect(`AUTH PLAIN ${plain}`, [235]);
      }
      await expect(`MAIL FROM:<${from}>`, [250]);
      await expect(`RCPT TO:<${to}>`, [250, 251]);
      await expect("DATA", [354]);
      const domain = from.split("@")[1] ?? "localhost";
      const headers = [
        `From: ${from}`,
        `To: ${to}`,
        `Subject: ${subject}`,
        `Date: ${new Date().toUTCString().replace(/GMT$/, "+0000")}`,
        `Message-ID: <${randomBytes(12).toString("hex")}@${domain}>`,
        "MIME-Version: 1.0",
        "Content-Type: text/plain; charset=utf-8",
        "Content-Transfer-Encoding: 8bit",
      ];
      await expect(`${headers.join("\r\n")}\r\n\r\n${dataLines(m.text)}\r\n.`, [250]);
      await expect("QUIT", [221]).catch(() => undefined);
    } finally {
      socket.destroy();
    }
  }
}
