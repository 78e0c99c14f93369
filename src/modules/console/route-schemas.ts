import { Type, type TObject, type TOptional, type TString } from 'typebox'
import { ID_PATTERN } from '../../db/ids.ts'

// The request schemas console routes declare (docs/console.md, "Route schemas"), as the API's routes do. A form's
// fields are all optional strings: the console's form parser gives strings, a missing one reads as '' and the handler
// says in words what is wrong with it (a missing CSRF token stays the CSRF check's 403, not a schema failure).

/** A record id in the address. */
export const Id = Type.String({ pattern: ID_PATTERN })

/** `/…/:id` */
export const IdParams = Type.Object({ id: Id })

type Fields<F extends string> = { [K in F]: TOptional<TString> }

/** Optional strings named `names`: the fields of a form or of a query string. */
export function fields<F extends string> (names: readonly F[]): TObject<Fields<F>> {
  return Type.Object(Object.fromEntries(names.map((name) => [name, Type.Optional(Type.String())])) as Fields<F>)
}

/** A form's body: its fields and the CSRF token every form carries. */
export const formBody = <F extends string>(names: readonly F[]) => fields([...names, 'csrf_token'])

/** A form without fields of its own (a button): only its CSRF token. */
export const ButtonBody = formBody([])

/**
 * A form whose field names are built as it is filled in (rows of a list: `expectations.0.kind`): every name is kept
 * and every value must be text (unknown names are not dropped, so the handler reads only those it knows).
 */
export const OpenFormBody = Type.Record(Type.String(), Type.String())
