/**
 * A leading byte order mark taken off a text file's content. Editors on Windows write one; JSON.parse refuses it
 * (`Unexpected token '\uFEFF'`) and it would hide a JSON trace's `format` field from format detection.
 */
export function withoutBom(text: string): string {
  return text.startsWith('\uFEFF') ? text.slice(1) : text;
}
