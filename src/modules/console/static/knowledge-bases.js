// A knowledge base's page (console/knowledge-bases.ts): while its files are being read, ask the server for their
// states every two seconds and show them in the table; stop when none is left to read. Without this script the
// page's "refresh it" link does the same by hand.
const INTERVAL_MS = 2000

const table = document.querySelector('table[data-poll]')
const status = document.getElementById('reading')

async function poll () {
  let answer
  try {
    const res = await fetch(table.dataset.poll, { headers: { accept: 'application/json' } })
    if (!res.ok) return
    answer = await res.json()
  } catch {
    // Offline or signed out: the link still refreshes by hand.
    return
  }
  for (const file of answer.files) {
    // Ids are hexadecimal: safe in a selector as they are.
    const row = table.querySelector(`tr[data-file="${file.id}"]`)
    if (row === null) continue
    row.querySelector('.file-state').textContent = file.state
    row.querySelector('.file-passages').textContent = String(file.passages)
  }
  if (answer.reading) {
    setTimeout(poll, INTERVAL_MS)
  } else if (status !== null) {
    status.textContent = 'Every file has been read.'
  }
}

if (table !== null) setTimeout(poll, INTERVAL_MS)
