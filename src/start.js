// Entry of `npm start` and of the image. Plain JavaScript that any Node.js can parse: it checks the version
// before the first `.ts` file is loaded, since an older Node fails there with an error that does not say why.
import { fileURLToPath } from 'node:url'

// package.json "engines": type stripping without a flag, and what undici 8 and pg-boss 12 need.
const REQUIRED = [22, 19]

/** Why this Node.js cannot run Switchboard, or undefined when it can. */
export function nodeVersionProblem (version) {
  const [major, minor] = version.split('.').map(Number)
  if (major > REQUIRED[0] || (major === REQUIRED[0] && minor >= REQUIRED[1])) return undefined
  return `Switchboard needs Node.js ${REQUIRED.join('.')} or newer (24 recommended); this is ${version}: install Node.js 24 (https://nodejs.org, or \`nvm install 24\`) and run npm start again`
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const problem = nodeVersionProblem(process.versions.node)
  if (problem === undefined) {
    import('./main.ts')
  } else {
    process.stderr.write(problem + '\n')
    process.exitCode = 2
  }
}
