import { validatorOf } from '../capabilities/registry.ts'
import { Workflow, type ApiCallStep } from '../agents/workflow.ts'

// An agent's stored workflow as the runtime reads it: through its schema, so that a row written before a schema
// change (or by hand) is never run half-understood.

/** The workflow in `stored` (agents.workflow), or undefined when there is none or it no longer matches its schema. */
export function readWorkflow (stored: unknown): Workflow | undefined {
  if (stored === null || stored === undefined) return undefined
  const value: unknown = structuredClone(stored)
  return isWorkflow(value) ? value : undefined
}

function isWorkflow (value: unknown): value is Workflow {
  return validatorOf(Workflow)(value)
}

/** The after-call API call step `id` of a workflow, if it still is one. */
export function afterCallStep (workflow: Workflow | undefined, id: string): ApiCallStep | undefined {
  const step = workflow?.steps.find((candidate) => candidate.id === id)
  return step?.type === 'api_call' && step.run === 'after_call' ? step : undefined
}
