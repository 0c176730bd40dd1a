import { AppError } from '../../schema/errors.ts';

export const AVATAR_MAX_UPLOAD_BYTES = 5 * 1024 * 1024;
const AVATAR_SIZE = 256;

/**
 * Re-encodes an uploaded avatar: decode (refusing anything sharp cannot read or that claims a huge
 * canvas), rotate by EXIF, resize to a square, encode as WebP. Re-encoding drops EXIF/GPS metadata and
 * any payload smuggled in the original file.
 */
export async function processAvatar(bytes: Uint8Array): Promise<Buffer> {
  // Loaded on first use: libvips is ~7 MB resident that a service whose owners never upload an avatar does not need.
  const { default: sharp } = await import('sharp');
  // One instance: the header read for the format check is the one the pipeline then decodes. Its constructor throws
  // too (an empty file), so it is made inside the check.
  let image: ReturnType<typeof sharp> | undefined;
  let format: string | undefined;
  try {
    image = sharp(bytes, { limitInputPixels: 40_000_000, failOn: 'error' });
    format = (await image.metadata()).format;
  } catch {
    format = undefined;
  }
  // Only the raster formats we name: sharp would also render SVG (a script-bearing, reference-following format) and
  // read TIFF, PDF or raw pixel dumps, none of which an avatar needs.
  if (image === undefined || format === undefined || !AVATAR_FORMATS.has(format)) throw notAnImage();
  try {
    return await image.rotate().resize(AVATAR_SIZE, AVATAR_SIZE, { fit: 'cover' }).webp({ quality: 85 }).toBuffer();
  } catch {
    throw notAnImage();
  }
}

/** sharp's names of the formats we take (AVIF is read as 'heif'). */
const AVATAR_FORMATS = new Set(['png', 'jpeg', 'webp', 'gif', 'heif']);
const notAnImage = () => new AppError('UNSUPPORTED_MEDIA_TYPE', 'The file is not an image we can read', 'Upload a PNG, JPEG, WebP, GIF or AVIF image');
