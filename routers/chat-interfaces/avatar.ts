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
  try {
    return await sharp(bytes, { limitInputPixels: 40_000_000, failOn: 'error' })
      .rotate()
      .resize(AVATAR_SIZE, AVATAR_SIZE, { fit: 'cover' })
      .webp({ quality: 85 })
      .toBuffer();
  } catch {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'The file is not an image we can read', 'Upload a PNG, JPEG, WebP, GIF or AVIF image');
  }
}
