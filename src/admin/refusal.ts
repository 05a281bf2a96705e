import { InternalError } from '../errors/internal-error';

/**
 * An admin request refused on purpose: an HTTP status, a code automation can match, a message and
 * a hint that says what to do. Never carries a secret.
 */
export class AdminRefusal extends InternalError {
  constructor(
    readonly status: number,
    code: string,
    message: string,
    readonly hint?: string,
  ) {
    super(code, message);
  }
}

export const keyNotFound = (id: string): AdminRefusal =>
  new AdminRefusal(404, 'key_not_found', `no key with id ${JSON.stringify(id)}`);
export const groupNotFound = (group: string): AdminRefusal =>
  new AdminRefusal(
    422,
    'group_not_found',
    `no group named ${JSON.stringify(group)}`,
    'GET /admin/v1/groups lists the groups',
  );
export const webhookNotFound = (id: string): AdminRefusal =>
  new AdminRefusal(
    404,
    'webhook_not_found',
    `no webhook with id ${JSON.stringify(id)}`,
    'GET /admin/v1/webhooks lists them',
  );
export const webhookExists = (id: string): AdminRefusal =>
  new AdminRefusal(409, 'webhook_exists', `a webhook with id ${JSON.stringify(id)} already exists`);
export const groupExists = (name: string): AdminRefusal =>
  new AdminRefusal(409, 'group_exists', `a group named ${JSON.stringify(name)} already exists`, 'PATCH it instead');
export const groupHasKeys = (name: string, ids: readonly string[]): AdminRefusal =>
  new AdminRefusal(
    409,
    'group_has_keys',
    `group ${JSON.stringify(name)} still has keys${ids.length > 0 ? ` (${ids.slice(0, 5).join(', ')}${ids.length > 5 ? ', ...' : ''})` : ''}`,
    `move them to another group (PATCH /admin/v1/keys/{id} {"group": ...}) or delete them first; GET /admin/v1/keys?group=${encodeURIComponent(name)} lists them`,
  );
