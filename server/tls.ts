import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generate } from 'selfsigned';

export interface TlsMaterial {
  cert: string;
  key: string;
  selfSigned: boolean;
}

/**
 * TLS_CERT/TLS_KEY (PEM file paths) when given; otherwise a self-signed certificate for localhost,
 * created once in DATA_DIR/tls and reused, so a bare machine serves HTTPS with zero setup.
 */
export async function loadTlsMaterial(options: { certPath?: string; keyPath?: string; dataDir: string }): Promise<TlsMaterial> {
  if (options.certPath || options.keyPath) {
    if (!options.certPath || !options.keyPath) throw new Error('TLS_CERT and TLS_KEY must be given together');
    return { cert: readFileSync(options.certPath, 'utf8'), key: readFileSync(options.keyPath, 'utf8'), selfSigned: false };
  }
  const dir = join(options.dataDir, 'tls');
  const certFile = join(dir, 'self-signed-cert.pem');
  const keyFile = join(dir, 'self-signed-key.pem');
  if (existsSync(certFile) && existsSync(keyFile)) {
    return { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8'), selfSigned: true };
  }
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 825 * 24 * 3600 * 1000),
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  } as never);
  mkdirSync(dir, { recursive: true });
  writeFileSync(keyFile, pems.private, { mode: 0o600 });
  writeFileSync(certFile, pems.cert);
  return { cert: pems.cert, key: pems.private, selfSigned: true };
}
