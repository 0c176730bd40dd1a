/**
 * Generates the small sample documents used by the parser self-test. Run once with
 *   npx tsx adapters/outbound/parsers/samples/generate.ts
 * and keep the outputs in this folder (each well under 20 KB). Dev-only: uses pdf-lib and docx.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { AlignmentType, Document, HeadingLevel, Packer, Paragraph, Table, TableCell, TableRow, TextRun, WidthType } from 'docx';
import { PDFDocument, StandardFonts } from 'pdf-lib';

const here = (name: string) => fileURLToPath(new URL(`./${name}`, import.meta.url));

export async function samplePdf(pages: string[][]): Promise<Uint8Array> {
  const pdf = await PDFDocument.create();
  // Fixed dates so regenerating gives the same bytes.
  pdf.setCreationDate(new Date('2024-01-01T00:00:00Z'));
  pdf.setModificationDate(new Date('2024-01-01T00:00:00Z'));
  pdf.setTitle('Parser self-test sample');
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  for (const lines of pages) {
    const page = pdf.addPage([595, 842]);
    lines.forEach((line, i) => page.drawText(line, { x: 50, y: 780 - i * 20, size: 12, font }));
  }
  return pdf.save({ useObjectStreams: false });
}

export async function sampleDocx(): Promise<Uint8Array> {
  const cell = (text: string) => new TableCell({ children: [new Paragraph(text)], width: { size: 3000, type: WidthType.DXA } });
  const doc = new Document({
    creator: 'parser self-test',
    sections: [
      {
        children: [
          new Paragraph({ text: 'Quarterly Report', heading: HeadingLevel.HEADING_1 }),
          new Paragraph({ children: [new TextRun('Revenue grew in every region this quarter. '), new TextRun({ text: 'Bold remark.', bold: true })] }),
          new Paragraph({ text: 'The table below lists the figures per region.', alignment: AlignmentType.LEFT }),
          new Table({
            rows: [
              new TableRow({ children: [cell('Region'), cell('Revenue'), cell('Growth')] }),
              new TableRow({ children: [cell('North'), cell('1200'), cell('5%')] }),
            ],
          }),
          new Paragraph('Closing paragraph after the table.'),
        ],
      },
    ],
  });
  return new Uint8Array(await Packer.toBuffer(doc));
}

export const SAMPLE_MD = `---
title: Parser sample
tags: [sample]
---

# Knowledge base sample

This is a **Markdown** sample with a [link to the docs](https://example.com/docs) and *emphasis*.

## A list

- first item
- second item with \`inline code\`

\`\`\`ts
const answer = 42;
\`\`\`

![A diagram of the pipeline](diagram.png)
`;

export const SAMPLE_TXT = `Plain text sample.\r\nIt has Windows line endings and a few lines.\r\n\r\nThe parser keeps the text as it is.\r\n`;

async function main() {
  const pdf = await samplePdf([
    ['Sample PDF, page one.', 'The knowledge base indexes this text for search.'],
    ['Sample PDF, page two.', 'Each page keeps its own page number.'],
  ]);
  writeFileSync(here('sample.pdf'), pdf);
  writeFileSync(here('sample.docx'), await sampleDocx());
  writeFileSync(here('sample.md'), SAMPLE_MD);
  writeFileSync(here('sample.txt'), SAMPLE_TXT);
  console.log('samples written');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
