// The page that answers the New campaign form (console/campaigns.ts) shows the import's report, which is not stored.
// Its address becomes the campaign's own, so that reloading it shows the campaign instead of sending the form again
// (which would create, and call, a second campaign).
const created = document.querySelector('[data-address]')
if (created !== null) window.history.replaceState(null, '', created.dataset.address)
