/**
 * Owners' and visitors' text placed in a mail header (a Subject, a display name), as one line: each run of line
 * breaks, tabs or other control characters becomes one space. Inputs refuse these characters now, but rows stored
 * before that check, and jobs queued before it, still hold them; the mailer refuses a header with a line break
 * (it would start another header), so without this such a mail would fail on every attempt.
 */
export function headerText(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
}
