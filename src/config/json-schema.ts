/**
 * The JSON Schema of modelgate.yaml, derived from schema.ts and published as
 * modelgate.schema.json (`npm run gen:schema` writes it; test/config/json-schema.test.ts fails when
 * the checked-in file differs). envoy/modelgate.yaml names it on its first line, so editors with
 * the YAML language server complete and check the file. Draft 7: what editors support best.
 *
 * It describes the file's input: defaults are shown, not required. Rules across fields
 * (duplicates, a key's group, a credential's variable) are not expressible in it and stay with
 * the validator.
 */
import { z } from 'zod';
import { configFileSchema, expiryValue } from './schema';

/** Where the published schema lives, from the repository root. */
export const JSON_SCHEMA_FILE = 'modelgate.schema.json';

export function configJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(configFileSchema, {
    target: 'draft-7',
    io: 'input',
    unrepresentable: 'any',
    override(ctx) {
      // A YAML 1.1 timestamp has no JSON form: in JSON the expiry is its ISO 8601 string.
      if (ctx.zodSchema === expiryValue) {
        for (const k of Object.keys(ctx.jsonSchema)) delete (ctx.jsonSchema as Record<string, unknown>)[k];
        Object.assign(ctx.jsonSchema, {
          type: 'string',
          description: 'ISO 8601: a date (midnight UTC) or a date-time, e.g. 2027-01-01T00:00:00Z',
        });
      }
    },
  });
}

/** The file's text: the schema as indented JSON. */
export function configJsonSchemaText(): string {
  return `${JSON.stringify(configJsonSchema(), null, 2)}\n`;
}
