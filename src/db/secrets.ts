import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto'
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { parseSecretsKey, type Config } from '../config.ts'

// Secrets the server must use later (carrier tokens, SIP passwords, integration credentials, header values,
// signing secrets) are stored as AES-256-GCM envelopes: `enc:v1:<key id>:<iv>:<tag>:<ciphertext>` (base64url).
// The key id (the first 8 hex digits of the key's SHA-256) tells which key wrote a value, so that a wrong
// key is named as such rather than failing as a broken value, and so that rotation can check its work.
// A value without the prefix is a plaintext left from before encryption: it reads as it is, and start-up
// encrypts it (stored-secrets.ts).

export const SEALED_PREFIX = 'enc:v1:'
const SEALED = /^enc:v1:([0-9a-f]{8}):([A-Za-z0-9_-]{16}):([A-Za-z0-9_-]{22}):([A-Za-z0-9_-]*)$/

/** A stored secret that the configured key cannot open. */
export class SecretsKeyError extends Error {}

export interface Cipher {
  /** Names the key in envelopes: not secret, and the same for the same key everywhere. */
  readonly keyId: string
  seal: (plain: string) => string
  open: (stored: string) => string
  /** A 32-byte key for one purpose (HKDF-SHA256 with `label`), so that no two uses share key material. */
  derive: (label: string) => Buffer
}

export const keyIdOf = (key: Buffer) => createHash('sha256').update(key).digest('hex').slice(0, 8)

export function isSealed (value: string): boolean {
  return SEALED.test(value)
}

export function createCipher (key: Buffer): Cipher {
  if (key.length !== 32) throw new Error('a secrets key is 32 bytes')
  const keyId = keyIdOf(key)
  return {
    keyId,
    derive: (label) => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), `switchboard:${label}`, 32)),
    seal (plain) {
      const iv = randomBytes(12)
      const cipher = createCipheriv('aes-256-gcm', key, iv)
      const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
      return `${SEALED_PREFIX}${keyId}:${iv.toString('base64url')}:${cipher.getAuthTag().toString('base64url')}:${data.toString('base64url')}`
    },
    open (stored) {
      const parts = SEALED.exec(stored)
      if (parts === null) return stored
      const [, id, iv, tag, data] = parts
      if (id !== keyId) {
        throw new SecretsKeyError(`a stored secret was encrypted with key ${id}, but the configured secrets key is ${keyId}: set SECRETS_KEY to the key the data was written with`)
      }
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'))
        decipher.setAuthTag(Buffer.from(tag, 'base64url'))
        return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8')
      } catch {
        throw new SecretsKeyError(`a stored secret sealed with key ${id} does not decrypt: it was altered`)
      }
    }
  }
}

export const newSecretsKey = () => randomBytes(32).toString('base64')

/** Where the embedded database's installation keeps its key when SECRETS_KEY is not set. */
export const keyFileOf = (dataDir: string) => path.join(dataDir, 'secrets.key')

/**
 * The key: SECRETS_KEY, or (embedded database only; config.ts refuses DATABASE_URL without SECRETS_KEY)
 * the key file in DATA_DIR, made on the first start with mode 0600 and read on every later one.
 */
export async function loadSecretsKey (config: Pick<Config, 'secretsKey' | 'dataDir'>): Promise<Buffer> {
  if (config.secretsKey !== undefined) return config.secretsKey
  const file = keyFileOf(config.dataDir)
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    if ((err as { code?: string }).code !== 'ENOENT') throw err
    await mkdir(config.dataDir, { recursive: true })
    // `wx`: two processes starting at once on a fresh DATA_DIR keep the one key written first.
    await writeFile(file, newSecretsKey() + '\n', { mode: 0o600, flag: 'wx' }).catch((writeErr: { code?: string }) => {
      if (writeErr.code !== 'EEXIST') throw writeErr
    })
    text = await readFile(file, 'utf8')
  }
  const key = parseSecretsKey(text)
  if (key === undefined) throw new SecretsKeyError(`${file} does not hold a secrets key (32 bytes, base64)`)
  return key
}

/**
 * Writes a new key beside the key file; `commit` puts it in place (rename: atomic), `discard` removes it.
 * Rotation stages the key before its transaction commits, so that a committed rotation never lacks its key.
 */
export async function stageKeyFile (dataDir: string, key: Buffer): Promise<{ path: string, commit: () => Promise<void>, discard: () => Promise<void> }> {
  const file = keyFileOf(dataDir)
  const next = `${file}.next`
  await writeFile(next, key.toString('base64') + '\n', { mode: 0o600 })
  await chmod(next, 0o600)
  return { path: next, commit: async () => { await rename(next, file) }, discard: async () => { await rm(next, { force: true }) } }
}

// The process's cipher, installed once at start-up (main.ts, the CLI, the test helper): the modules'
// queries seal and open through it, as they use the one DB, without threading it through every call.
let installed: Cipher | undefined

export function useCipher (cipher: Cipher): void {
  installed = cipher
}

function cipher (): Cipher {
  if (installed === undefined) throw new Error('no secrets key loaded: call useCipher at start-up')
  return installed
}

export const sealSecret = (plain: string) => cipher().seal(plain)
export const openSecret = (stored: string) => cipher().open(stored)
/** A key of the installation's for one purpose (signed links); it changes when the secrets key is rotated. */
export const deriveKey = (label: string) => cipher().derive(label)

/** Seals each value of a name → value map (integration credentials, header values). */
export function sealValues (values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([name, value]) => [name, sealSecret(value)]))
}

export function openValues (values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([name, value]) => [name, openSecret(value)]))
}
