/** A CI log for tests of big outputs and watches: about `bytes` bytes of step lines, the verdict on its last line. */
export function ciLog(bytes: number, status: string): string {
  const lines: string[] = [];
  for (let size = 0, i = 1; size < bytes; i++) {
    const line = `[step ${i}] compiling module ${i} of the api service ... ok`;
    lines.push(line);
    size += line.length + 1;
  }
  return `${lines.join('\n')}\nBUILD STATUS: ${status}\n`;
}
