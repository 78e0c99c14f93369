import t from 'tap'
import { newId } from '../../src/db/ids.ts'
import { findAgent } from '../../src/modules/agents/queries.ts'
import type { Workflow } from '../../src/modules/agents/workflow.ts'
import { layers, workflowGraph } from '../../src/modules/console/workflow-graph.ts'
import { setup, type TestContext } from '../helpers/app.ts'
import { createAgent } from '../helpers/calls.ts'
import { csrfOf, followRefusal, signedInWithKey, type ConsoleClient } from '../helpers/console-client.ts'

// An agent's workflow in the console (docs/workflows.md, "In the console"): steps built one form at a time, the
// API's graph check shown next to the fields it names, the write-only header values of API call steps, the page's
// buttons (order, start, remove), and the drawn graph.

/** A step form's fields as a person leaves them when they fill in only `fields` (the rest as the page shows them). */
async function addStep (browser: ConsoleClient, agentId: string, type: string, fields: Record<string, string>) {
  const page = await browser.get(`/agents/${agentId}/workflow/steps/new?type=${type}`)
  if (page.statusCode !== 200) throw new Error(`${type}: ${page.statusCode}\n${page.body}`)
  return await browser.post(`/agents/${agentId}/workflow/steps`, { csrf_token: csrfOf(page.body), type, transitions: '1', ...fields })
}

const GREET = {
  id: 'greet',
  name: 'Greet',
  global: '',
  instructions: 'Ask how many people are coming.',
  interruption_sensitivity: '',
  voice_id: '',
  tools_mode: 'all',
  transitions: '1',
  variables: '1',
  'variables.0.name': 'party_size',
  'variables.0.type': 'number',
  'variables.0.description': 'how many people',
  'variables.0.enum_values': '',
  'variables.0.required': 'true'
}

const CHECK = {
  id: 'check',
  name: 'Check <availability>',
  global: '',
  run: 'during_call',
  url: 'https://api.example.com/slots',
  method: 'GET',
  headers: '2',
  'headers.0.name': 'Authorization',
  'headers.0.value': 'Bearer console-secret',
  query: '1',
  'query.0.name': 'n',
  'query.0.value': '{{party_size}}',
  body: '',
  response_variables: '1',
  'response_variables.0.name': 'slot',
  'response_variables.0.value': 'data.slot',
  retry_schedule: '',
  transitions: '1',
  'transitions.0.to': 'bye',
  'transitions.0.condition': 'always',
  'transitions.0.text': ''
}

async function agentWithFlow (ctx: TestContext) {
  const { account, browser, user } = await signedInWithKey(ctx)
  const agent = await createAgent(ctx.app, account)
  const stored = async () => (await findAgent(ctx.db, user.id, agent._id))!.workflow as unknown as Workflow | null
  const greet = await addStep(browser, agent._id, 'conversation', GREET)
  t.equal(greet.statusCode, 303, greet.body)
  t.equal(greet.headers.location, `/agents/${agent._id}/workflow/steps/greet?saved=1`)
  const bye = await addStep(browser, agent._id, 'end', { id: 'bye', name: 'Goodbye', global: '', message: 'See you soon.', from: 'greet', from_condition: 'prompt', from_text: 'the caller has nothing more to ask' })
  t.equal(bye.statusCode, 303, bye.body)
  const check = await addStep(browser, agent._id, 'api_call', { ...CHECK, from: 'greet', from_condition: 'expression', from_text: 'party_size > 2' })
  t.equal(check.statusCode, 303, check.body)
  return { account, browser, user, agent, stored }
}

t.test('a three-step workflow built in the console: stored as the API stores it, listed, drawn', async (t) => {
  const ctx = await setup(t)
  const { browser, agent, stored, user } = await agentWithFlow(ctx)
  const workflow = await stored()
  t.same(workflow, {
    start: 'greet',
    steps: [
      {
        id: 'greet',
        name: 'Greet',
        type: 'conversation',
        instructions: 'Ask how many people are coming.',
        variables: [{ name: 'party_size', type: 'number', description: 'how many people', required: true }],
        transitions: [
          { to: 'bye', condition: { type: 'prompt', prompt: 'the caller has nothing more to ask' } },
          { to: 'check', condition: { type: 'expression', expression: 'party_size > 2' } }
        ]
      },
      { id: 'bye', name: 'Goodbye', type: 'end', message: 'See you soon.' },
      {
        id: 'check',
        name: 'Check <availability>',
        type: 'api_call',
        run: 'during_call',
        url: 'https://api.example.com/slots',
        method: 'GET',
        headers: { Authorization: 'Bearer console-secret' },
        query: { n: '{{party_size}}' },
        response_variables: { slot: 'data.slot' },
        transitions: [{ to: 'bye', condition: { type: 'always' } }]
      }
    ]
  })
  const raw = await ctx.db.selectFrom('agents').select('workflow').where('id', '=', agent._id).executeTakeFirstOrThrow()
  t.notMatch(JSON.stringify(raw.workflow), 'console-secret', 'sealed at rest')

  const page = await browser.get(`/agents/${agent._id}/workflow`)
  t.equal(page.statusCode, 200)
  t.match(page.body, /<svg class="workflow"[^>]*role="img"/)
  for (const name of ['Greet', 'Goodbye', 'Check &lt;availability&gt;']) t.match(page.body, `text-anchor="middle">${name}</text>`, `${name} is drawn`)
  t.match(page.body, 'if party_size &gt; 2', 'the edge is labelled with its condition')
  t.match(page.body, /<strong>\(start\)<\/strong>/)
  t.notMatch(page.body, 'console-secret')
  const edit = await browser.get(`/agents/${agent._id}/workflow/steps/check`)
  t.notMatch(edit.body, 'console-secret', 'a header value is never shown')
  t.match(edit.body, 'Stored; empty keeps it')

  // Saved again with the header left empty: the stored value stays.
  const saved = await browser.post(`/agents/${agent._id}/workflow/steps/check`, {
    ...CHECK, csrf_token: csrfOf(edit.body), 'headers.0.value': '', 'headers.0.stored': 'true', url: 'https://api.example.com/v2/slots'
  })
  t.equal(saved.statusCode, 303, saved.body)
  const after = (await findAgent(ctx.db, user.id, agent._id))!.workflow as unknown as Workflow
  t.match(after.steps[2], { url: 'https://api.example.com/v2/slots', headers: { Authorization: 'Bearer console-secret' } })

  // Renamed, with the header left empty: the stored value follows the step, and what led to it follows the new id.
  const renamed = await browser.post(`/agents/${agent._id}/workflow/steps/check`, {
    ...CHECK, csrf_token: csrfOf(edit.body), id: 'lookup', 'headers.0.value': '', 'headers.0.stored': 'true', url: 'https://api.example.com/v2/slots'
  })
  t.equal(renamed.statusCode, 303, renamed.body)
  t.equal(renamed.headers.location, `/agents/${agent._id}/workflow/steps/lookup?saved=1`)
  const moved = (await findAgent(ctx.db, user.id, agent._id))!.workflow as unknown as Workflow
  t.match(moved.steps[2], { id: 'lookup', headers: { Authorization: 'Bearer console-secret' } })
  t.same(moved.steps[0].transitions![1], { to: 'lookup', condition: { type: 'expression', expression: 'party_size > 2' } })

  // The agent's page links to it.
  t.match((await browser.get(`/agents/${agent._id}`)).body, `href="/agents/${agent._id}/workflow">Open the workflow</a>`)
})

t.test('the API\'s refusals are shown next to the fields they name, and nothing is stored', async (t) => {
  const ctx = await setup(t)
  const { browser, agent, stored } = await agentWithFlow(ctx)
  const before = await stored()
  const edit = async (stepId: string, fields: Record<string, string>) => {
    const page = await browser.get(`/agents/${agent._id}/workflow/steps/${stepId}`)
    return await browser.post(`/agents/${agent._id}/workflow/steps/${stepId}`, { csrf_token: csrfOf(page.body), ...fields })
  }
  const errorOf = (body: string, field: string) => new RegExp(`id="${field}-error" class="field-error">([^<]*)<`).exec(body)?.[1]

  // Post/Redirect/Get: each refusal redirects to the step's page, whose draft shows the values sent and the problems.
  const refusedAt = async (stepId: string, fields: Record<string, string>) => (await followRefusal(browser, await edit(stepId, fields), `/agents/${agent._id}/workflow/steps/${stepId}`)).page.body

  const unknown = await followRefusal(browser, await edit('greet', { ...GREET, transitions: '1', 'transitions.0.to': 'bye', 'transitions.0.condition': 'expression', 'transitions.0.text': 'partysize > 8' }), `/agents/${agent._id}/workflow/steps/greet`)
  for (const view of [unknown.page, await browser.get(unknown.url)]) {
    t.equal(view.statusCode, 200)
    t.match(errorOf(view.body, 'transitions-0-text'), /^Reads &quot;partysize&quot;, which no step collects/)
    t.match(view.body, 'aria-invalid="true"')
    t.match(view.body, /<a href="#transitions-0-text">Reads &quot;partysize&quot;/, 'the summary links to the field')
    t.match(view.body, 'value="partysize &gt; 8"', 'the text sent is shown')
  }

  t.equal(errorOf(await refusedAt('greet', { ...GREET, transitions: '1', 'transitions.0.to': 'payment', 'transitions.0.condition': 'prompt', 'transitions.0.text': 'they pay' }), 'transitions-0-to'), '&quot;payment&quot; is not a step of this workflow.')

  const noWayOn = await refusedAt('check', { ...CHECK, 'headers.0.value': '', 'headers.0.stored': 'true', 'transitions.0.condition': 'expression', 'transitions.0.text': 'slot is set' })
  t.match(errorOf(noWayOn, 'transitions'), /^Needs an &quot;Otherwise&quot; transition last/)
  t.match(noWayOn, '<a href="#transitions">', 'a group\'s problem links to its group')
  t.match(noWayOn, '<fieldset class="group" id="transitions"')

  t.match(errorOf(await refusedAt('greet', { ...GREET, variables: '2', 'variables.1.name': 'party_size', 'variables.1.type': 'string' }), 'variables-1-name'), /^The name &quot;party_size&quot; is used twice/)

  const reserved = await refusedAt('check', { ...CHECK, 'headers.0.name': 'Host', 'headers.0.value': 'x-secret-value' })
  t.match(errorOf(reserved, 'headers-0-value'), /^Host is set by Switchboard/)
  t.notMatch(JSON.stringify(await ctx.db.selectFrom('console_drafts').select('form_values').execute()), 'x-secret-value', 'a header value is never kept in a draft')

  t.match(errorOf(await refusedAt('greet', { ...GREET, id: 'Greet Step' }), 'id'), /^The step id may hold only lower-case letters, digits and underscores/)

  const unreachable = await followRefusal(browser, await addStep(browser, agent._id, 'conversation', { ...GREET, id: 'survey', name: 'Survey', variables: '0' }), `/agents/${agent._id}/workflow/steps/new?type=conversation`)
  for (const view of [unreachable.page, await browser.get(unreachable.url)]) {
    t.match(view.body, '<p>Nothing leads to this step', 'the new step\'s page (its type in the address) says why')
    t.match(view.body, 'value="survey"')
  }
  const noType = await browser.post(`/agents/${agent._id}/workflow/steps`, { csrf_token: csrfOf((await browser.get(`/agents/${agent._id}/workflow`)).body), ...GREET, id: 'other', type: 'teleport' })
  t.match((await followRefusal(browser, noType, `/agents/${agent._id}/workflow`)).page.body, '<p>No step added: choose one of the step types: Conversation, API call, Message, Transfer, End.</p>', 'a type that is not one')
  t.same(await stored(), before, 'nothing refused was stored')
})

t.test('the page\'s buttons: order, start, remove a step (with what led to it), remove the workflow; CSRF', async (t) => {
  const ctx = await setup(t)
  const { browser, agent, stored } = await agentWithFlow(ctx)
  const press = async (path: string) => {
    const page = await browser.get(`/agents/${agent._id}/workflow`)
    return await browser.post(`/agents/${agent._id}/workflow/${path}`, { csrf_token: csrfOf(page.body) })
  }
  const up = await press('steps/check/up')
  t.equal(up.statusCode, 303)
  t.same((await stored())!.steps.map((step) => step.id), ['greet', 'check', 'bye'])
  t.equal((await press('steps/greet/down')).statusCode, 303)
  t.same((await stored())!.steps.map((step) => step.id), ['check', 'greet', 'bye'])

  // The greeting would be unreachable: refused in words, nothing changes.
  // Post/Redirect/Get: the workflow page with the draft says why, again on a reload, which changes nothing.
  const start = await followRefusal(browser, await press('steps/check/start'), `/agents/${agent._id}/workflow`)
  for (const view of [start.page, await browser.get(start.url)]) {
    t.equal(view.statusCode, 200)
    t.match(view.body, /<p>Not changed: The step &quot;Greet&quot; cannot be reached from the start step/)
  }
  t.equal((await stored())!.start, 'greet', 'the start unchanged')
  // Removing the end takes away the API call's only way on: refused.
  const bye = await followRefusal(browser, await press('steps/bye/delete'), `/agents/${agent._id}/workflow`)
  t.match(bye.page.body, /Not changed: The step &quot;Check &lt;availability&gt;&quot; needs an &quot;Otherwise&quot; transition last/)
  // Removing the API call takes the transition to it along.
  t.equal((await press('steps/check/delete')).statusCode, 303)
  t.same((await stored())!.steps.map((step) => step.id), ['greet', 'bye'])
  t.same((await stored())!.steps[0].transitions, [{ to: 'bye', condition: { type: 'prompt', prompt: 'the caller has nothing more to ask' } }])

  t.equal((await browser.post(`/agents/${agent._id}/workflow/delete`, { csrf_token: 'wrong' })).statusCode, 403, 'without the CSRF token')
  t.ok(await stored())
  t.equal((await press('delete')).statusCode, 303)
  t.equal(await stored(), null)
  t.match((await browser.get(`/agents/${agent._id}/workflow`)).body, 'This agent has no workflow')
})

t.test('the graph: layers by distance from the start, globals from their own root, loops drawn back up', async (t) => {
  const workflow = {
    start: 'a',
    steps: [
      { id: 'a', name: 'A', type: 'conversation', instructions: '', transitions: [{ to: 'b', condition: { type: 'prompt', prompt: 'go' } }, { to: 'c', condition: { type: 'prompt', prompt: 'skip' } }] },
      { id: 'b', name: 'B', type: 'conversation', instructions: '', transitions: [{ to: 'a', condition: { type: 'prompt', prompt: 'again' } }, { to: 'c', condition: { type: 'prompt', prompt: 'done' } }] },
      { id: 'c', name: 'C', type: 'end' },
      { id: 'h', name: 'Human', type: 'transfer', global: { prompt: 'a person' }, target: { type: 'number', phone_number: '+14155550123' } }
    ]
  } as Workflow
  t.same(Object.fromEntries(layers(workflow)), { a: 0, b: 1, c: 1, h: 0 })
  const svg = workflowGraph(workflow).value
  t.equal(svg.match(/<g class="edge">/g)?.length, 4)
  t.match(svg, 'class="step transfer global"')
  t.match(svg, 'class="step conversation start"')
  t.notMatch(svg, 'style=', 'no inline style (the CSP forbids it)')
})

t.test('a workspace member sees the workflow read-only, query values masked, and may change nothing', async (t) => {
  const ctx = await setup(t)
  const { browser, agent, user, stored } = await agentWithFlow(ctx)
  const workspace = newId()
  await ctx.db.insertInto('workspaces').values({ id: workspace, user_id: user.id, name: 'Team' }).execute()
  await ctx.db.updateTable('agents').set({ workspace_id: workspace }).where('id', '=', agent._id).execute()
  const member = await signedInWithKey(ctx)
  await ctx.db.insertInto('workspace_members').values({ workspace_id: workspace, email: member.user.email, role: 'member', status: 'active', member_user_id: member.user.id, joined_at: new Date() }).execute()
  await ctx.db.updateTable('console_sessions').set({ workspace_id: workspace }).where('user_id', '=', member.user.id).execute()

  const page = await member.browser.get(`/agents/${agent._id}/workflow`)
  t.equal(page.statusCode, 200)
  t.match(page.body, '<svg class="workflow"')
  t.notMatch(page.body, /Make start|Remove the workflow|Add a step/, 'no change buttons')
  const step = await member.browser.get(`/agents/${agent._id}/workflow/steps/check`)
  t.equal(step.statusCode, 200)
  t.match(step.body, '<fieldset class="plain" disabled>')
  t.notMatch(step.body, /\{\{party_size\}\}"|console-secret/, 'the query value and the header value are not shown')
  t.match(step.body, /name="query\.0\.value" value="\*{8}"/)
  const before = await stored()
  const csrf = csrfOf(page.body)
  t.equal((await member.browser.post(`/agents/${agent._id}/workflow/steps/check/start`, { csrf_token: csrf })).statusCode, 403)
  t.equal((await member.browser.post(`/agents/${agent._id}/workflow/steps/check`, { csrf_token: csrf, ...CHECK })).statusCode, 403)
  t.same(await stored(), before)
  // Someone else's agent is not found at all.
  t.equal((await browser.get(`/agents/${newId()}/workflow`)).statusCode, 404)
})

t.test('steps added at once from many forms all survive: each change is made on the workflow as locked, not as the form saw it', async (t) => {
  const ctx = await setup(t)
  const { browser, agent, stored } = await agentWithFlow(ctx)
  const page = await browser.get(`/agents/${agent._id}/workflow/steps/new?type=end`)
  const csrf = csrfOf(page.body)
  const results = await Promise.all(Array.from({ length: 12 }, async (_, i) => await browser.post(`/agents/${agent._id}/workflow/steps`, {
    csrf_token: csrf, type: 'end', transitions: '0', id: `end_${i}`, name: `End ${i}`, global: '', message: '', from: 'greet', from_condition: 'prompt', from_text: `the caller says ${i}`
  })))
  t.same(results.map((res) => res.statusCode), Array(12).fill(303))
  const workflow = (await stored())!
  t.equal(workflow.steps.length, 15, 'the three steps and the twelve new ones')
  t.equal(workflow.steps[0].transitions!.length, 14, 'each one\'s transition from the greeting')
})
