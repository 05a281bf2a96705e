/**
 * The admin API's file backend for a command line run on the file store (`keys new`, `keys
 * model-budget`): modelgate's own state beside the config (`<config>.admin.json`, never the YAML),
 * its groups and keys read from the config and what an id spent from the meter's state file (read
 * only: a running service owns it, and sees the change within a second).
 */
import { adminStatePath, FileAdminBackend } from '../admin/file-backend';
import { FileStore } from '../store/file-store';
import { spentInStateFile } from '../store/file-meter';
import { meterStatePath } from '../server/service';
import { readConfig } from './envoy';

export interface FileAdmin {
  readonly backend: FileAdminBackend;
  /** The state file it writes. */
  readonly where: string;
  close(): Promise<void>;
}

export function openFileAdmin(configPath: string, env: NodeJS.ProcessEnv): FileAdmin {
  const config = readConfig(configPath, env);
  const store = new FileStore(config.groups, config.keys);
  const statePath = meterStatePath(configPath, config.meter.stateFile);
  const where = adminStatePath(configPath);
  const backend = new FileAdminBackend(store, {
    path: where,
    configPath,
    pollMs: 0,
    spent: (id) => spentInStateFile(statePath, id),
  });
  return {
    backend,
    where,
    close: async () => {
      await backend.close();
      await store.close();
    },
  };
}
