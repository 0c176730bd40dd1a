import { deflateSync } from 'node:zlib';

/**
 * A small PDF (well under 1 KB) whose one page's content stream, compressed, holds `operators` graphics-state
 * saves (`q`) and then a line of text: pdf.js walks every operator and keeps a growing state stack, which
 * costs it tens of seconds of CPU for 50,000 or more. Written byte by byte with a correct cross-reference
 * table, as an attacker would, since PDF libraries refuse to emit such a stream.
 */
export function hostilePdf(operators = 60_000, nested = false): Buffer {
  const ops = nested ? `${'q 1 0 0 1 0 0 cm '.repeat(operators)}${'Q '.repeat(operators)}` : 'q '.repeat(operators);
  const content = deflateSync(Buffer.from(`${ops}\nBT /F1 12 Tf 72 720 Td (A tiny PDF that is expensive to parse) Tj ET\n`, 'latin1'), { level: 9 });
  const objects = [
    Buffer.from('<< /Type /Catalog /Pages 2 0 R >>'),
    Buffer.from('<< /Type /Pages /Kids [3 0 R] /Count 1 >>'),
    Buffer.from('<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>'),
    Buffer.concat([Buffer.from(`<< /Length ${content.length} /Filter /FlateDecode >>\nstream\n`), content, Buffer.from('\nendstream')]),
    Buffer.from('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>'),
  ];
  const parts: Buffer[] = [Buffer.from('%PDF-1.4\n')];
  let offset = parts[0]!.length;
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(offset);
    const object = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`), body, Buffer.from('\nendobj\n')]);
    parts.push(object);
    offset += object.length;
  });
  const xref = [`xref\n0 ${objects.length + 1}\n`, '0000000000 65535 f \n', ...offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`)].join('');
  parts.push(Buffer.from(`${xref}trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${offset}\n%%EOF\n`));
  return Buffer.concat(parts);
}
