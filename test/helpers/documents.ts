import { Document, Packer, Paragraph, Table, TableCell, TableRow, HeadingLevel, TextRun } from 'docx';
import { PDFDocument, StandardFonts, rgb } from 'pdf-lib';

/** Real documents for tests, generated with pdf-lib and docx. */
export async function makePdf(pages: string[][]): Promise<Buffer> {
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  for (const lines of pages) {
    const page = pdf.addPage([595, 842]);
    lines.forEach((line, i) => page.drawText(line, { x: 50, y: 780 - i * 18, size: 12, font }));
  }
  return Buffer.from(await pdf.save());
}

/** A PDF with no text layer: only drawn shapes, like a scan. */
export async function makeImageOnlyPdf(): Promise<Buffer> {
  const pdf = await PDFDocument.create();
  const page = pdf.addPage([595, 842]);
  page.drawRectangle({ x: 50, y: 50, width: 400, height: 600, color: rgb(0.2, 0.2, 0.2) });
  return Buffer.from(await pdf.save());
}

export async function makeDocx(title: string, paragraphs: string[], table: string[][]): Promise<Buffer> {
  const doc = new Document({
    sections: [
      {
        children: [
          new Paragraph({ text: title, heading: HeadingLevel.HEADING_1 }),
          ...paragraphs.map((p) => new Paragraph({ children: [new TextRun(p)] })),
          new Table({ rows: table.map((row) => new TableRow({ children: row.map((cell) => new TableCell({ children: [new Paragraph(cell)] })) })) }),
        ],
      },
    ],
  });
  return Buffer.from(await Packer.toBuffer(doc));
}
