import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { DB } from '../../db/database.ts'
import { AUTH_ERRORS, COMPONENT, EpochMs, errors, ObjectId, Paging } from '../../http/schemas.ts'
import { getSubscription, listCreditEntries, updateSubscription, type Subscription as SubscriptionData } from './credits.ts'

// Credits are whole numbers; the limits keep an amount far inside what a person would mean.
export const MAX_CREDITS = 100_000_000

export const Credits = Type.Integer({ minimum: 0, maximum: MAX_CREDITS, description: 'credits (1 credit = 1 US cent of usage)' })
export const PositiveCredits = Type.Integer({ minimum: 1, maximum: MAX_CREDITS, description: 'credits (1 credit = 1 US cent of usage)' })

const Subscription = Type.Object({
  plan: Type.Enum(['free', 'pro', 'enterprise']),
  status: Type.Enum(['active', 'past_due', 'canceled']),
  credit_balance: Type.Integer({ description: 'sum of every ledger entry; negative when calls used more than was there' }),
  auto_top_up: Type.Object({
    enabled: Type.Boolean(),
    threshold: Type.Integer({ description: 'a charge that leaves the balance below this adds one top-up' })
  }),
  top_up_amount: Type.Integer({ description: 'credits added by each top-up' }),
  current_period: Type.Object({ start: EpochMs, end: EpochMs }, { description: 'the monthly billing period that contains now' })
}, { [COMPONENT]: 'Subscription' })

const CreditEntry = Type.Object({
  _id: ObjectId,
  kind: Type.Enum(['grant', 'call_charge', 'top_up', 'adjustment']),
  amount: Type.Integer({ description: 'credits; negative for charges' }),
  call_id: Type.Union([ObjectId, Type.Null()]),
  description: Type.String(),
  created_at: EpochMs
}, { [COMPONENT]: 'CreditEntry' })

function subscriptionView (s: SubscriptionData) {
  return {
    plan: s.plan,
    status: s.status,
    credit_balance: s.creditBalance,
    auto_top_up: { enabled: s.autoTopUpEnabled, threshold: s.autoTopUpThreshold },
    top_up_amount: s.topUpAmount,
    current_period: { start: s.periodStart.getTime(), end: s.periodEnd.getTime() }
  }
}

export const subscriptionRoutes: FastifyPluginAsyncTypebox<{ db: DB }> = async (app, { db }) => {
  app.get('/subscription', {
    schema: {
      tags: ['subscription'],
      summary: 'Get the subscription',
      description: 'Plan, credit balance, auto top-up settings and the current period. The first request of an account starts its free plan with its welcome credits.',
      response: { 200: Subscription, ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => subscriptionView(await getSubscription(db, request.userId)))

  app.patch('/subscription/auto-top-up', {
    schema: {
      tags: ['subscription'],
      summary: 'Configure auto top-up',
      description: 'Either field or both. Takes effect from the next charge; enabling it does not top up at once.',
      body: Type.Object({ enabled: Type.Optional(Type.Boolean()), threshold: Type.Optional(Credits) }, { anyOf: [{ required: ['enabled'] }, { required: ['threshold'] }] }),
      response: { 200: Subscription, ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => {
    const { enabled, threshold } = request.body
    await updateSubscription(db, request.userId, { autoTopUpEnabled: enabled, autoTopUpThreshold: threshold })
    return subscriptionView(await getSubscription(db, request.userId))
  })

  app.patch('/subscription/top-up-amount', {
    schema: {
      tags: ['subscription'],
      summary: 'Set the top-up amount',
      body: Type.Object({ top_up_amount: PositiveCredits }),
      response: { 200: Subscription, ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => {
    await updateSubscription(db, request.userId, { topUpAmount: request.body.top_up_amount })
    return subscriptionView(await getSubscription(db, request.userId))
  })

  app.get('/subscription/credits', {
    schema: {
      tags: ['subscription'],
      summary: 'List credit ledger entries',
      description: 'Every change of the balance, newest first: grants, call charges, top-ups.',
      querystring: Type.Object(Paging),
      response: { 200: Type.Array(CreditEntry), ...errors(...AUTH_ERRORS) }
    }
  }, async (request) => {
    // Starts the subscription, so an account's very first request already lists its welcome grant.
    await getSubscription(db, request.userId)
    const entries = await listCreditEntries(db, request.userId, request.query)
    return entries.map((e) => ({ _id: e.id, kind: e.kind, amount: e.amount, call_id: e.call_id, description: e.description, created_at: e.created_at.getTime() }))
  })
}
