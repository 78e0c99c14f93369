import t from 'tap'
import { setup } from '../helpers/app.ts'

t.test('the OpenAPI document describes the account resources and phone numbers', async (t) => {
  const { app } = await setup(t)
  const res = await app.inject({ method: 'GET', url: '/openapi.json' })
  t.equal(res.statusCode, 200)
  const doc = res.json()
  const expected = {
    '/v1/customer/list': ['get'],
    '/v1/customer/{id}': ['get', 'patch', 'delete'],
    '/v1/customer': ['post'],
    '/v1/workspaces/list': ['get'],
    '/v1/workspaces': ['post'],
    '/v1/workspaces/{id}': ['get', 'patch', 'delete'],
    '/v1/workspaces/{workspace_id}/invite-member': ['post'],
    '/v1/workspaces/{workspace_id}/remove-member': ['delete'],
    '/v1/workspaces/{workspace_id}/accept-invitation': ['post'],
    '/v1/subscription': ['get'],
    '/v1/subscription/auto-top-up': ['patch'],
    '/v1/subscription/top-up-amount': ['patch'],
    '/v1/subscription/credits': ['get'],
    '/v1/phone-number/list': ['get'],
    '/v1/phone-number/available': ['get'],
    '/v1/phone-number/buy': ['post'],
    '/v1/phone-number/import-carrier': ['post'],
    '/v1/phone-number/carrier-credentials': ['patch'],
    '/v1/phone-number/connect-to-sip': ['patch'],
    '/v1/phone-number/{id}': ['get', 'patch', 'delete']
  }
  for (const [path, methods] of Object.entries(expected)) {
    for (const method of methods) {
      const operation = doc.paths[path]?.[method]
      t.ok(operation, `${method.toUpperCase()} ${path}`)
      t.ok(operation?.summary, `${method.toUpperCase()} ${path} has a summary`)
    }
  }
  const answer = doc.paths['/v1/phone-number/{id}'].get.responses['200'].content['application/json'].schema
  t.same(answer, { $ref: '#/components/schemas/PhoneNumber' })
  t.notOk(JSON.stringify(doc.components.schemas.PhoneNumber).match(/auth_token|sip_password|"password"/), 'no secret is part of the answer')
})
