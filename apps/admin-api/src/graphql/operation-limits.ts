import type { ASTVisitor, DocumentNode, FragmentDefinitionNode, OperationDefinitionNode, SelectionSetNode, ValidationContext } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';

export interface OperationSizeLimits {
  /** Aliased fields per operation (an alias is how one field is asked for many times). */
  readonly maxAliases: number;
  /** Field selections per operation, fragments expanded where they are spread. */
  readonly maxFields: number;
}

export interface OperationSize {
  readonly fields: number;
  readonly aliases: number;
  /** The walk stopped early (past `stopAt` fields): the counts are lower bounds. */
  readonly truncated: boolean;
}

/**
 * Counts what executing an operation selects: every field (fragments counted at each spread, as
 * execution does) and every alias. Stops once past `stopAt` fields, or past four times as many selections of any
 * kind (a diamond of fragments ending in no field at all would otherwise be walked 2^n times), so measuring a hostile
 * document costs no more than the limit.
 */
export function measureOperation(op: OperationDefinitionNode, fragments: ReadonlyMap<string, FragmentDefinitionNode>, stopAt = Infinity): OperationSize {
  let fields = 0;
  let aliases = 0;
  let selections = 0;
  const maxSelections = stopAt * 4;
  const seen = new Set<string>();
  const walk = (set: SelectionSetNode | undefined): void => {
    if (!set) return;
    for (const sel of set.selections) {
      if (fields > stopAt || ++selections > maxSelections) return;
      if (sel.kind === 'Field') {
        fields++;
        if (sel.alias && sel.alias.value !== sel.name.value) aliases++;
        walk(sel.selectionSet);
      } else if (sel.kind === 'InlineFragment') walk(sel.selectionSet);
      else if (!seen.has(sel.name.value)) {
        // Fragment cycles are graphql's own validation error; here they just stop the walk.
        seen.add(sel.name.value);
        walk(fragments.get(sel.name.value)?.selectionSet);
        seen.delete(sel.name.value);
      }
    }
  };
  walk(op.selectionSet);
  return { fields, aliases, truncated: fields > stopAt || selections > maxSelections };
}

const fragmentsOf = (doc: DocumentNode): Map<string, FragmentDefinitionNode> => {
  const map = new Map<string, FragmentDefinitionNode>();
  for (const def of doc.definitions) if (def.kind === 'FragmentDefinition') map.set(def.name.value, def);
  return map;
};

/**
 * A validation rule refusing operations with too many aliases or fields, before anything
 * executes: 620 aliases of an aggregate field would otherwise each run a database query. Yoga then
 * answers with errors and no data (HTTP 400).
 */
export function operationSizeRule(limits: OperationSizeLimits) {
  return (context: ValidationContext): ASTVisitor => {
    const fragments = fragmentsOf(context.getDocument());
    return {
      OperationDefinition(node) {
        const size = measureOperation(node, fragments, limits.maxFields);
        if (size.aliases > limits.maxAliases) {
          context.reportError(
            createGraphQLError(
              `Query has too many aliases: ${size.truncated ? 'at least ' : ''}${size.aliases} (the maximum is ${limits.maxAliases}). Split it into several requests.`,
              {
                nodes: [node],
                extensions: { code: 'too_many_aliases' },
              },
            ) as Parameters<ValidationContext['reportError']>[0],
          );
        } else if (size.fields > limits.maxFields || size.truncated) {
          context.reportError(
            createGraphQLError(
              size.fields > limits.maxFields
                ? `Query selects too many fields: more than ${limits.maxFields} (the maximum). Ask for fewer fields or split it.`
                : `Query spreads fragments too many times: more than ${4 * limits.maxFields} selections before its fields (the maximum). Spread fewer fragments.`,
              {
                nodes: [node],
                extensions: { code: 'too_many_fields' },
              },
            ) as Parameters<ValidationContext['reportError']>[0],
          );
        }
      },
    };
  };
}

/** Adds the size rule to Yoga's validation (a pure rule, so Yoga's per-document cache suits it). */
export function useOperationSizeLimit(limits: OperationSizeLimits): Plugin {
  const rule = operationSizeRule(limits);
  return {
    onValidate({ addValidationRule }) {
      addValidationRule(rule);
    },
  };
}

const sizes = new WeakMap<DocumentNode, Map<string, OperationSize>>();

/** The size of the operation a request executes (memoised per parsed document, which Yoga caches). */
export function operationSize(doc: DocumentNode, operationName: string | null | undefined, stopAt: number): OperationSize {
  let perOp = sizes.get(doc);
  if (!perOp) sizes.set(doc, (perOp = new Map()));
  const key = operationName ?? '';
  let size = perOp.get(key);
  if (!size) {
    const op = doc.definitions.find(
      (d): d is OperationDefinitionNode => d.kind === 'OperationDefinition' && (!operationName || d.name?.value === operationName),
    );
    size = op ? measureOperation(op, fragmentsOf(doc), stopAt) : { fields: 0, aliases: 0, truncated: false };
    perOp.set(key, size);
  }
  return size;
}
