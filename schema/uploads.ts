import { z } from 'zod';

/** OpenAPI shows a file as a binary string, whatever object the adapter hands the procedure. */
function asBinary(description?: string) {
  return ({ jsonSchema }: { jsonSchema: Record<string, unknown> }) => {
    for (const key of Object.keys(jsonSchema)) delete jsonSchema[key];
    Object.assign(jsonSchema, { type: 'string', format: 'binary' }, description ? { description } : {});
  };
}

/** A file part of a multipart request, as the REST adapter hands it to a procedure. */
export const uploadedFileSchema = z
  .object({
    fileName: z.string(),
    mimeType: z.string(),
    bytes: z.custom<Uint8Array>((v) => v instanceof Uint8Array, 'must be a file').meta({ override: { type: 'string', format: 'binary' } }),
  })
  .meta({ override: asBinary('the file (multipart/form-data part)') });
export type UploadedFile = z.infer<typeof uploadedFileSchema>;

export const rawResponseSchema = z.object({
  contentType: z.string(),
  body: z.custom<Uint8Array>((v) => v instanceof Uint8Array).meta({ override: { type: 'string', format: 'binary' } }),
  cacheControl: z.string().optional(),
});
