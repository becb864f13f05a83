/**
 * What a tool call produced, collected as it streams (docs/TOOLS.md, "Big results").
 *
 * Big-result rule, decided here once: an output over `maxBytes` keeps its head and its tail —
 * `headShare` of the room to the head, the rest to the tail, where a log's verdict is — each
 * cut at a line end when one is near, with a marker in the middle naming the bytes and lines left
 * out (and, when the tool says so, how to read them). A message cut to fit a model's window keeps
 * its head and tail the same way (`cutMiddle`).
 *
 * A watch (`../watch-check.ts`) collects more: the sha256 of the whole output, a copy while it is
 * at most `keepBytes`, and — given the size of the last output (`since`) — the digest of what came
 * before that offset and a collector of what came after it, so an output that only grew is told
 * apart from one that changed.
 */
import { createHash, type Hash } from 'node:crypto';

/** Limits of one collector (from `tools.*`). */
export interface ToolOutputOptions {
  /** Bytes a reader is shown (`tools.max_result_bytes`). */
  maxBytes: number;
  /** Share of `maxBytes` kept from the head of a cut output (`tools.result_head_share`). */
  headShare: number;
  /**
   * Bytes of a file read through (`tools.files.max_scan_bytes` for a call, `tools.watch_max_bytes`
   * for a watch); past it only the file's first and last bytes are read (`fileRanges`).
   */
  fileReadBytes: number;
  /** Collect for a watch: a digest, a copy up to `keepBytes`, and what came after offset `since`. */
  watch?: { keepBytes: number; since?: number };
}

/** A rendered output: the text a reader sees, the output's size, and whether it was cut. */
export interface RenderedOutput {
  content: string;
  bytes: number;
  truncated: boolean;
}

/** One stretch of a file to read, `[start, end)` in bytes. */
export interface ByteRange {
  start: number;
  end: number;
}

const NEWLINE = 0x0a;

/** A tool's output as it streams in; bounded memory whatever its size. */
export class ToolOutput {
  readonly headBytes: number;
  readonly tailBytes: number;
  /**
   * The number of the output's first line (a page of a file starts at its line); `undefined`
   * when unknown (a page read back from the end of a file too large to scan).
   */
  firstLine: number | undefined = 1;
  /** How a reader can read what the marker says was left out (`read_file` sets it). */
  readHint?: (fromLine: number, toLine: number) => string;

  private readonly head: Buffer[] = [];
  private headLen = 0;
  private tail: Buffer[] = [];
  private tailLen = 0;
  private total = 0;
  private newlineCount = 0;
  private skippedBytes = 0;
  private lastByte = -1;
  private readonly hash: Hash | undefined;
  private finalDigest: string | undefined;
  private prefix: string | undefined;
  private copy: Buffer[] | null | undefined;
  private copyLen = 0;
  private readonly after: ToolOutput | undefined;

  constructor(private readonly options: ToolOutputOptions) {
    this.headBytes = Math.floor(options.maxBytes * options.headShare);
    this.tailBytes = options.maxBytes - this.headBytes;
    const watch = options.watch;
    if (watch) {
      this.hash = createHash('sha256');
      this.copy = [];
      if (watch.since !== undefined) {
        this.after = new ToolOutput({ ...options, watch: undefined });
        if (watch.since === 0) this.prefix = createHash('sha256').digest('hex');
      }
    }
  }

  /** A collector holding `text` whole. */
  static of(text: string, options: ToolOutputOptions): ToolOutput {
    const out = new ToolOutput(options);
    out.push(text);
    return out;
  }

  /** Bytes of a file read through (`ToolOutputOptions.fileReadBytes`). */
  get fileReadBytes(): number {
    return this.options.fileReadBytes;
  }

  /** Bytes of the output, the ones not read included. */
  get bytes(): number {
    return this.total;
  }

  /** Lines of the output (a last line without a line end counts); undefined when some bytes were not read. */
  get lines(): number | undefined {
    if (this.skippedBytes > 0) return undefined;
    return this.newlineCount + (this.total > 0 && this.lastByte !== NEWLINE ? 1 : 0);
  }

  /** Whether a reader sees less than the whole output. */
  get truncated(): boolean {
    return this.skippedBytes > 0 || this.total > this.options.maxBytes;
  }

  /** Add the next bytes of the output. */
  push(data: Buffer | string): void {
    const chunk = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (chunk.length === 0) return;
    if (this.hash) this.digestChunk(chunk);
    if (this.headLen < this.headBytes && this.skippedBytes === 0) {
      const part = chunk.subarray(0, this.headBytes - this.headLen);
      this.head.push(part);
      this.headLen += part.length;
    }
    if (this.tailBytes > 0) {
      const part = chunk.length > this.tailBytes ? chunk.subarray(chunk.length - this.tailBytes) : chunk;
      this.tail.push(part);
      this.tailLen += part.length;
      while (this.tailLen - this.tail[0]!.length >= this.tailBytes) this.tailLen -= this.tail.shift()!.length;
    }
    if (this.copy) {
      if (this.copyLen + chunk.length <= this.options.watch!.keepBytes) {
        this.copy.push(chunk);
        this.copyLen += chunk.length;
      } else this.copy = null;
    }
    for (let i = chunk.indexOf(NEWLINE); i >= 0; i = chunk.indexOf(NEWLINE, i + 1)) this.newlineCount += 1;
    this.lastByte = chunk[chunk.length - 1]!;
    this.total += chunk.length;
  }

  /** `n` bytes of the output that are not read (the middle of a file too large to read through). */
  skip(n: number): void {
    if (n <= 0) return;
    this.hash?.update(`\0${n} bytes not read\0`);
    if (this.prefix !== undefined) this.after?.skip(n);
    this.total += n;
    this.skippedBytes += n;
    this.tail = [];
    this.tailLen = 0;
    this.lastByte = -1;
    if (this.copy) this.copy = null;
  }

  /**
   * The stretches of a file of `size` bytes to read into this collector: all of it up to
   * `fileReadBytes`; past that its head and its end — the last `tailBytes` for a reader, the last
   * `fileReadBytes` less the head for a watch (whose digest is then over the size, head and end).
   */
  fileRanges(size: number): ByteRange[] {
    const limit = this.options.fileReadBytes;
    const endBytes = this.options.watch ? Math.max(this.tailBytes, limit - this.headBytes) : this.tailBytes;
    if (size <= Math.max(limit, this.headBytes + endBytes)) return [{ start: 0, end: size }];
    return [
      { start: 0, end: this.headBytes },
      { start: size - endBytes, end: size },
    ];
  }

  /** sha256 (hex) of the whole output (a watch's collector only; once the output is complete). */
  digest(): string {
    if (!this.hash) throw new Error('digest() of a collector that is not a watch');
    this.finalDigest ??= this.hash.digest('hex');
    return this.finalDigest;
  }

  /**
   * What was added after offset `since` when the output up to it has the digest `before` (the
   * last output's): an output that only grew. Undefined otherwise.
   */
  appendedTo(before: string): ToolOutput | undefined {
    if (this.prefix === undefined || this.prefix !== before || !this.after || this.after.bytes === 0) return undefined;
    // Numbered from the line the appended part starts on.
    this.after.firstLine = this.skippedBytes > 0 ? undefined : this.newlineCount - this.after.newlineCount + 1;
    return this.after;
  }

  /** The whole output as text while it is at most `watch.keepBytes` (a watch's collector), else undefined. */
  kept(): string | undefined {
    return this.copy ? Buffer.concat(this.copy, this.copyLen).toString('utf8') : undefined;
  }

  /** The text a reader sees: the whole output, or its head and tail with a marker (the rule above). */
  render(): RenderedOutput {
    if (!this.truncated) {
      const need = this.total - this.headLen;
      const whole = Buffer.concat([...this.head, lastBytes(this.tail, this.tailLen, need)]);
      return { content: whole.toString('utf8'), bytes: this.total, truncated: false };
    }
    const headText = decodeHead(Buffer.concat(this.head, this.headLen));
    const tailText = decodeTail(lastBytes(this.tail, this.tailLen, Math.min(this.tailLen, this.tailBytes)));
    const head = headText.slice(0, alignedHeadEnd(headText));
    const tail = tailText.slice(alignedTailStart(tailText));
    const leftOut = this.total - Buffer.byteLength(head) - Buffer.byteLength(tail);
    const lines =
      this.firstLine === undefined || this.lines === undefined
        ? undefined
        : omittedLines(head, tail, this.lines, this.firstLine, tail.length < tailText.length);
    const what = `${n(leftOut)} of ${n(this.total)} bytes${lines ? ` (lines ${n(lines.from)}–${n(lines.to)})` : ''} left out`;
    const how = lines && this.readHint ? `; ${this.readHint(lines.from, lines.to)}` : this.skippedBytes > 0 ? ' (not read)' : '';
    const content = `${head}${head.endsWith('\n') || head === '' ? '' : '\n'}[… ${what}${how} …]\n${tail}`;
    return { content, bytes: this.total, truncated: true };
  }

  /** Digest the chunk, taking the digest of what came before `since` when the chunk crosses it. */
  private digestChunk(chunk: Buffer): void {
    const since = this.options.watch!.since;
    const crosses = since !== undefined && this.prefix === undefined && this.skippedBytes === 0 && this.total + chunk.length >= since;
    if (!crosses) {
      this.hash!.update(chunk);
      if (this.prefix !== undefined) this.after?.push(chunk);
      return;
    }
    const cut = since - this.total;
    this.hash!.update(chunk.subarray(0, cut));
    this.prefix = this.hash!.copy().digest('hex');
    this.hash!.update(chunk.subarray(cut));
    this.after!.push(chunk.subarray(cut));
  }
}

/**
 * `text` cut to at most `keepChars` characters by the big-result rule (head and tail, line-aligned,
 * a marker between); as it is when it fits.
 * @param headShare - share of `keepChars` kept from the head (`tools.result_head_share`); the rest from the tail
 * @param why - what the marker says the cut was for
 */
export function cutMiddle(text: string, keepChars: number, headShare: number, why: string): string {
  if (text.length <= keepChars) return text;
  const headChars = Math.floor(keepChars * headShare);
  const headText = text.slice(0, headChars);
  const tailText = keepChars - headChars > 0 ? text.slice(text.length - (keepChars - headChars)) : '';
  const head = headText.slice(0, alignedHeadEnd(headText));
  const tail = tailText.slice(alignedTailStart(tailText));
  const total = lineCount(text);
  const lines = omittedLines(head, tail, total, 1, tail.length < tailText.length);
  const kept = head.length + tail.length;
  return `${head}${head.endsWith('\n') || head === '' ? '' : '\n'}[… ${why}: ${n(kept)} of ${n(text.length)} characters kept, lines ${n(lines.from)}–${n(lines.to)} left out …]\n${tail}`;
}

/** Lines of `text` (a last line without a line end counts). */
function lineCount(text: string): number {
  let count = 0;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) count += 1;
  return count + (text.length > 0 && !text.endsWith('\n') ? 1 : 0);
}

/**
 * The first and last line left out between `head` and `tail` of an output of `total` lines whose
 * first line is numbered `firstLine`. `tailOnLineStart`: the tail starts a line (else it ends one left out).
 */
function omittedLines(
  head: string,
  tail: string,
  total: number,
  firstLine: number,
  tailOnLineStart: boolean,
): { from: number; to: number } {
  const headBreaks = lineCount(head) - (head.length > 0 && !head.endsWith('\n') ? 1 : 0);
  const from = firstLine + headBreaks;
  const firstTail = firstLine + total - lineCount(tail);
  const to = tail === '' ? firstLine + total - 1 : tailOnLineStart ? firstTail - 1 : firstTail;
  return { from, to: Math.max(from, to) };
}

/** Where a head is cut: after its last line end when that keeps at least half of it, else where it ends. */
function alignedHeadEnd(text: string): number {
  const i = text.lastIndexOf('\n');
  return i >= 0 && i + 1 >= text.length / 2 ? i + 1 : text.length;
}

/** Where a tail starts: after its first line end when that keeps at least half of it, else where it starts. */
function alignedTailStart(text: string): number {
  const i = text.indexOf('\n');
  return i >= 0 && i + 1 <= text.length / 2 ? i + 1 : 0;
}

/** The first bytes as text, never ending inside a UTF-8 sequence. */
function decodeHead(buf: Buffer): string {
  let end = buf.length;
  // Back off a sequence the cut left without all its bytes.
  let lead = end - 1;
  while (lead > 0 && (buf[lead]! & 0xc0) === 0x80) lead -= 1;
  if (lead >= 0 && lead < end) {
    const b = buf[lead]!;
    const size = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    if (lead + size > end) end = lead;
  }
  return buf.subarray(0, end).toString('utf8');
}

/** The last bytes as text, never starting inside a UTF-8 sequence. */
function decodeTail(buf: Buffer): string {
  let start = 0;
  while (start < buf.length && (buf[start]! & 0xc0) === 0x80) start += 1;
  return buf.subarray(start).toString('utf8');
}

/** The last `count` bytes held in `chunks` (`length` bytes in all). */
function lastBytes(chunks: readonly Buffer[], length: number, count: number): Buffer {
  if (count <= 0) return Buffer.alloc(0);
  const all = Buffer.concat(chunks, length);
  return all.subarray(Math.max(0, all.length - count));
}

function n(x: number): string {
  return x.toLocaleString('en-US');
}
