import { describe, expect, it } from 'vitest';
import { createTestDb, testBackends } from '@infer/db/testing';
import { formatGpuHourPrice, parseGpuHourPrice } from '@infer/shared';
import { parseEntryInput } from '../src/modules/catalog/catalog-input.ts';
import { createEntry, getEntryByName, updateEntry } from '../src/modules/catalog/catalog.service.ts';
import { toCatalogView } from '../src/modules/catalog/catalog-view.ts';

describe('dedicated price per GPU-hour (catalog field, string form beside the structured value)', () => {
  it('parses and renders "$<n> per GPU-hour"; empty means unpriced', () => {
    expect(parseGpuHourPrice('$2.50 per GPU-hour')).toBe(2.5);
    expect(parseGpuHourPrice(' 4 / gpu-hr ')).toBe(4);
    expect(parseGpuHourPrice('')).toBeNull();
    expect(() => parseGpuHourPrice('$2.50 per hour')).toThrow(/per GPU-hour/);
    expect(formatGpuHourPrice(2.5)).toBe('$2.50 per GPU-hour');
    expect(formatGpuHourPrice(3)).toBe('$3.00 per GPU-hour');
    expect(formatGpuHourPrice(0.125)).toBe('$0.125 per GPU-hour');
    expect(formatGpuHourPrice(null)).toBe('');
  });

  it('takes either form, refuses a disagreement or a bad value naming the field', () => {
    expect(parseEntryInput({ dedicatedPrice: '$3 per GPU-hour' })).toEqual({ dedicatedPricePerGpuHour: 3 });
    expect(parseEntryInput({ dedicatedPricePerGpuHour: 3, dedicatedPrice: '$3 per GPU-hour' })).toEqual({ dedicatedPricePerGpuHour: 3 });
    expect(parseEntryInput({ dedicatedPrice: '' })).toEqual({ dedicatedPricePerGpuHour: null });
    expect(() => parseEntryInput({ dedicatedPricePerGpuHour: 2, dedicatedPrice: '$3 per GPU-hour' })).toThrow(
      expect.objectContaining({ param: 'dedicatedPricePerGpuHour' }),
    );
    expect(() => parseEntryInput({ dedicatedPrice: 'cheap' })).toThrow(expect.objectContaining({ param: 'dedicatedPrice' }));
    expect(() => parseEntryInput({ dedicatedPricePerGpuHour: -1 })).toThrow(expect.objectContaining({ param: 'dedicatedPricePerGpuHour' }));
  });

  it.each(testBackends())('is stored and shown (%s)', async (kind) => {
    const database = await createTestDb(kind);
    try {
      await createEntry(database.db, { name: 'Priced-8B', offeredDedicated: true, ...parseEntryInput({ dedicatedPrice: '$2.40 per GPU-hour' }) });
      let view = toCatalogView((await getEntryByName(database.db, 'Priced-8B'))!);
      expect(view).toMatchObject({ dedicatedPrice: '$2.40 per GPU-hour', dedicatedPricePerGpuHour: 2.4 });
      await updateEntry(database.db, view.id, parseEntryInput({ dedicatedPrice: null }));
      view = toCatalogView((await getEntryByName(database.db, 'Priced-8B'))!);
      expect(view).toMatchObject({ dedicatedPrice: '', dedicatedPricePerGpuHour: null });
    } finally {
      await database.close();
    }
  });
});
