import { randomBytes } from 'node:crypto';
import { dedicatedModelName } from '@infer/shared';
import type { Db } from './db.ts';
import { createUser } from './modules/auth/auth.service.ts';
import { addUpstream, createEntry, type CreateEntryInput } from './modules/catalog/catalog.service.ts';
import { createDeployment, registerReplica, setDeploymentState } from './modules/deployments/deployments.service.ts';
import { createApiKey } from './modules/keys/keys.service.ts';
import { withTransaction } from './modules/snapshots/outbox.ts';
import { addMember, createTenant, getTenantBySlug } from './modules/tenants/tenants.service.ts';

export interface SeedResult {
  adminEmail: string;
  adminPassword: string;
  apiKey: string;
  tenantSlug: string;
  /** A catalog Name callable on the shared surface. */
  sharedModel: string;
  /** The provider-prefixed identifier dedicated-mode examples send. */
  dedicatedModel: string;
  /** The catalog Name in the dedicated path. */
  dedicatedName: string;
}

type SeedEntry = CreateEntryInput & { servedModel: string };

/**
 * A realistic catalog; served names are vLLM-style and differ from the Names on purpose. Entries offered
 * dedicated carry a price per GPU-hour (H100-class rates), so dedicated GPU time costs something in usage.
 */
const CATALOG: readonly SeedEntry[] = [
  {
    name: 'Llama-3.3-70B-Instruct',
    provider: 'Meta',
    servedModel: 'meta-llama/Llama-3.3-70B-Instruct',
    parameterSizeB: 70,
    gpuCount: 4,
    contextLength: 131072,
    concurrency: 8,
    coldStartSeconds: 45,
    priceInputPerM: 0.59,
    priceOutputPerM: 0.79,
    dedicatedPricePerGpuHour: 2.5,
    useCases: ['Chat', 'Reasoning', 'Multilingual'],
    summary: "Meta's 70B instruction-tuned Llama 3.3: strong general chat and reasoning with a 128K context.",
    detailedIntro:
      'Llama 3.3 70B Instruct is a multilingual model tuned for dialogue. It matches much larger models on many benchmarks while fitting on four GPUs, and supports tool calling and long documents up to 128K tokens.',
    tags: ['chat', 'function-calling', 'cline', 'continue'],
    offeredShared: true,
    offeredDedicated: true,
  },
  {
    name: 'DeepSeek-V3',
    provider: 'deepseek-ai',
    servedModel: 'deepseek-ai/DeepSeek-V3',
    parameterSizeB: 671,
    gpuCount: 8,
    contextLength: 65536,
    concurrency: 4,
    coldStartSeconds: 120,
    priceInputPerM: 0.27,
    priceOutputPerM: 1.1,
    dedicatedPricePerGpuHour: 3.5,
    useCases: ['Chat', 'Coding', 'Reasoning'],
    summary: 'A 671B mixture-of-experts model (37B active) with frontier-level coding and math.',
    detailedIntro: 'DeepSeek-V3 uses multi-head latent attention and DeepSeekMoE for efficient inference.',
    tags: ['chat', 'coding', 'moe', 'cline', 'roo-code'],
    offeredShared: true,
    offeredDedicated: true,
  },
  {
    name: 'Qwen2.5-Coder-32B-Instruct',
    provider: 'Qwen',
    servedModel: 'Qwen/Qwen2.5-Coder-32B-Instruct',
    parameterSizeB: 32,
    gpuCount: 2,
    contextLength: 32768,
    concurrency: 6,
    coldStartSeconds: 30,
    priceInputPerM: 0.2,
    priceOutputPerM: 0.6,
    dedicatedPricePerGpuHour: 2.5,
    useCases: ['Coding', 'Code review', 'Agents'],
    summary: 'Code-specialised Qwen 2.5: completion, repair and reasoning over repositories.',
    detailedIntro: 'Trained on 5.5T tokens of code and text; strong at fill-in-the-middle and agentic coding tools.',
    tags: ['coding', 'cline', 'cursor', 'continue', 'aider'],
    offeredShared: true,
    offeredDedicated: true,
  },
  {
    name: 'Mistral-Small-24B-Instruct',
    provider: 'mistralai',
    servedModel: 'mistralai/Mistral-Small-24B-Instruct-2501',
    parameterSizeB: 24,
    gpuCount: 1,
    contextLength: 32768,
    concurrency: 10,
    coldStartSeconds: 20,
    priceInputPerM: 0.1,
    priceOutputPerM: 0.3,
    dedicatedPricePerGpuHour: 2.0,
    useCases: ['Chat', 'Function calling'],
    summary: 'A fast 24B model for low-latency assistants and function calling.',
    tags: ['chat', 'function-calling', 'low-latency'],
    offeredShared: true,
    offeredDedicated: true,
  },
  {
    name: 'gemma-3-27b-it',
    provider: 'google',
    servedModel: 'google/gemma-3-27b-it',
    parameterSizeB: 27,
    gpuCount: 1,
    contextLength: 131072,
    concurrency: 6,
    coldStartSeconds: 25,
    priceInputPerM: 0.1,
    priceOutputPerM: 0.2,
    useCases: ['Chat', 'Summarisation'],
    summary: "Google's Gemma 3 27B instruction-tuned model with a 128K context.",
    tags: ['chat', 'multilingual'],
    offeredShared: true,
    offeredDedicated: false,
  },
  {
    // Deliberately sparse: no summary, so the default Summary text is rendered.
    name: 'Phi-4',
    provider: 'microsoft',
    servedModel: 'microsoft/phi-4',
    priceInputPerM: 0.07,
    priceOutputPerM: 0.14,
    offeredShared: true,
    offeredDedicated: false,
  },
  {
    name: 'gpt-oss-20b',
    provider: 'openai',
    servedModel: 'openai/gpt-oss-20b',
    parameterSizeB: 20,
    gpuCount: 1,
    contextLength: 131072,
    concurrency: 12,
    coldStartSeconds: 15,
    priceInputPerM: 0.05,
    priceOutputPerM: 0.2,
    dedicatedPricePerGpuHour: 1.8,
    useCases: ['Reasoning', 'Agents', 'Coding'],
    summary: "OpenAI's open-weight 21B MoE reasoning model, tuned for agentic tool use.",
    tags: ['reasoning', 'coding', 'cursor', 'codex'],
    offeredShared: true,
    offeredDedicated: true,
  },
];

const DEDICATED = 'Llama-3.3-70B-Instruct';

/**
 * Seeds a demo tenant, admin, key, catalog (sim upstreams from `simBasePort`) and one running
 * dedicated deployment, in one transaction. Returns null, doing nothing, when already seeded.
 */
export async function seedDemo(db: Db, opts: { simBasePort: number }): Promise<SeedResult | null> {
  if (await getTenantBySlug(db, 'demo')) return null;
  const adminEmail = 'admin@example.com';
  const adminPassword = randomBytes(12).toString('base64url');
  return withTransaction(db, async (trx) => {
    const tenant = await createTenant(trx, { slug: 'demo', name: 'Demo Tenant' });
    const admin = await createUser(trx, { email: adminEmail, password: adminPassword, displayName: 'Platform Admin', isPlatformAdmin: true });
    await addMember(trx, { tenantId: tenant.id, userId: admin.id, role: 'owner' });
    const key = await createApiKey(trx, { tenantId: tenant.id, name: 'demo key', createdBy: admin.id });

    let port = opts.simBasePort;
    for (const { servedModel, ...input } of CATALOG) {
      const entry = await createEntry(trx, input);
      await addUpstream(trx, { entryId: entry.id, kind: 'sim', url: `http://127.0.0.1:${port++}`, servedModel });
    }

    const seed = CATALOG.find((e) => e.name === DEDICATED);
    if (!seed) throw new Error(`seed catalog lacks ${DEDICATED}`);
    const actor = { userId: admin.id };
    const deployment = await createDeployment(trx, {
      tenantId: tenant.id,
      entryName: DEDICATED,
      minReplicas: 1,
      maxReplicas: 2,
      provisioner: 'local',
      actor,
    });
    await registerReplica(trx, {
      deploymentId: deployment.id,
      kind: 'sim',
      url: `http://127.0.0.1:${port}`,
      servedModel: seed.servedModel,
      state: 'ready',
      port,
    });
    await setDeploymentState(trx, { deploymentId: deployment.id, state: 'running', actor });

    return {
      adminEmail,
      adminPassword,
      apiKey: key.secret,
      tenantSlug: tenant.slug,
      sharedModel: DEDICATED,
      dedicatedModel: dedicatedModelName(DEDICATED, seed.provider),
      dedicatedName: DEDICATED,
    };
  });
}
