import t from 'tap'
import type { RetrievalField } from '../../src/modules/runtime/analysis/types.ts'
import { builtinAnalyser, dateIn, sentimentOf, summaryOf } from '../../src/modules/runtime/analysis/builtin.ts'

t.test('sentiment: English and German, with negation', async (t) => {
  t.equal(sentimentOf(['Thank you, that was really helpful!']).sentiment, 'positive')
  t.equal(sentimentOf(['This is terrible, I am very disappointed.']).sentiment, 'negative')
  t.equal(sentimentOf(['That was not helpful at all.']).sentiment, 'negative', 'negation flips')
  t.equal(sentimentOf(['Danke, das war super!']).sentiment, 'positive')
  t.equal(sentimentOf(['Das war nicht gut, ich bin verärgert.']).sentiment, 'negative')
  t.equal(sentimentOf(['Ich möchte einen Termin am Dienstag.']).sentiment, 'neutral')
  t.match(sentimentOf(['great, thanks']).explanation, /"great"/)
})

t.test('dates are read relative to the start of the call', async (t) => {
  const start = new Date('2026-11-20T10:00:00Z') // a Friday
  t.equal(dateIn('How about 2026-12-24?', start), '2026-12-24')
  t.equal(dateIn('tomorrow please', start), '2026-11-21')
  t.equal(dateIn('übermorgen', start), '2026-11-22')
  t.equal(dateIn('next Tuesday works', start), '2026-11-24')
  t.equal(dateIn('am Montag', start), '2026-11-23')
  t.equal(dateIn('on March 5th', start), '2027-03-05', 'a month already past is next year')
  t.equal(dateIn('am 3. Dezember', start), '2026-12-03')
  t.equal(dateIn('am 24.12.', start), '2026-12-24')
  t.equal(dateIn('no date here', start), undefined)
})

t.test('typed extraction and an extractive summary', async (t) => {
  const at = (speaker: 'agent' | 'user', content: string) => ({ speaker, content, timestamp: 0 })
  const fields: RetrievalField[] = [
    { name: 'budget', type: 'number', description: 'the budget in euros', required: true },
    { name: 'decision_maker', type: 'boolean', description: 'whether they decide', required: false },
    { name: 'plan', type: 'enum', description: 'plan wanted', enum_values: ['basic', 'pro_plus'], required: false },
    { name: 'contact_email', type: 'string', description: 'e-mail address', required: false },
    { name: 'callback_phone', type: 'string', description: 'phone number to call back', required: false },
    { name: 'start_date', type: 'date', description: 'when to start', required: false },
    { name: 'company', type: 'string', description: 'company name', required: false }
  ]
  const transcript = [
    at('agent', 'What budget do you have in mind?'),
    at('user', 'About 5k euros for the first year.'),
    at('agent', 'Do you decide the purchase yourself?'),
    at('user', 'No, my manager decides.'),
    at('user', 'We would want the pro plus plan. Write to ada@example.com or call +49 30 123456.'),
    at('agent', 'Could we start on Monday?'),
    at('user', 'Yes.')
  ]
  const result = await builtinAnalyser().analyse({ transcript, language: 'en', fields, summary: true, sentiment: true, callStart: new Date('2026-11-20T10:00:00Z'), conditions: [] })
  t.same(result.data, { budget: 5000, decision_maker: false, plan: 'pro_plus', contact_email: 'ada@example.com', callback_phone: '+4930123456', start_date: '2026-11-23' })
  t.notOk('company' in result.data, 'a field nobody mentioned is absent')
  t.match(result.summary, /^(Agent|Caller): /)
  t.equal(summaryOf([]), null)
  const off = await builtinAnalyser().analyse({ transcript, language: 'en', fields: [], summary: false, sentiment: false, callStart: new Date(), conditions: [] })
  t.same([off.summary, off.sentiment, off.data], [null, null, {}], 'the agent\'s switches are honoured')
})
