/** The events of a Server-Sent Events body: each `data:` line parsed as JSON, the closing `[DONE]` as is. */
export const sseEvents = (res: { text: string }): any[] =>
  res.text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => l.slice(6))
    .map((d) => (d === '[DONE]' ? d : JSON.parse(d)));
