import { onPostgres } from '../../helpers/postgres-backend.js';

if (await onPostgres()) await import('../free-tier-scores.test.js');
