import type { ASTNode, FragmentDefinitionNode, SelectionSetNode, ValidationContext, ASTVisitor } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';

export interface DepthLimits {
  /** Deepest field nesting of an operation (schema fields). */
  readonly maxDepth: number;
  /** Introspection (`__schema`, `__type`) is cyclic; tooling needs ~12 levels, so it gets its own cap. */
  readonly maxIntrospectionDepth: number;
}

/**
 * Depth of selection sets, following fragments, each walk stopped at `cap` levels (so a hostile document costs no
 * more than the cap to measure). Each fragment's depth is measured once per document: a diamond of fragments (each
 * spreading the next twice) was walked once per path, 2^n times. Fragment cycles are reported by graphql's own rules.
 */
function createDepthMeter(fragments: ReadonlyMap<string, FragmentDefinitionNode>, cap: number) {
  const memo = new Map<string, number>();
  const inProgress = new Set<string>();
  const fragmentDepth = (name: string): number => {
    const known = memo.get(name);
    if (known !== undefined) return known;
    if (inProgress.has(name)) return 0;
    inProgress.add(name);
    const d = depthOf(fragments.get(name)?.selectionSet, cap);
    inProgress.delete(name);
    memo.set(name, d);
    return d;
  };
  /** At most `limit` + 1: a deeper set is known to exceed the limit without walking further. */
  function depthOf(set: SelectionSetNode | undefined, limit: number): number {
    if (!set || limit <= 0) return 0;
    let max = 0;
    for (const sel of set.selections) {
      const d =
        sel.kind === 'Field'
          ? 1 + depthOf(sel.selectionSet, limit - 1)
          : sel.kind === 'InlineFragment'
            ? depthOf(sel.selectionSet, limit)
            : fragmentDepth(sel.name.value);
      if (d > max) max = d;
      if (max > limit) break;
    }
    return max;
  }
  return depthOf;
}

/** A validation rule refusing operations nested deeper than the limits, with a clear message. */
export function depthLimitRule(limits: DepthLimits) {
  return (context: ValidationContext): ASTVisitor => {
    const doc = context.getDocument();
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const def of doc.definitions) if (def.kind === 'FragmentDefinition') fragments.set(def.name.value, def);
    const depthOf = createDepthMeter(fragments, Math.max(limits.maxDepth, limits.maxIntrospectionDepth) + 1);
    return {
      OperationDefinition(node: ASTNode) {
        if (node.kind !== 'OperationDefinition') return;
        for (const sel of node.selectionSet.selections) {
          const introspection = sel.kind === 'Field' && sel.name.value.startsWith('__');
          const max = introspection ? limits.maxIntrospectionDepth : limits.maxDepth;
          const depth = depthOf({ kind: node.selectionSet.kind, selections: [sel] } as SelectionSetNode, max + 1);
          if (depth > max) {
            context.reportError(
              createGraphQLError(`Query is too deep: fields are nested more than ${max} levels (the maximum${introspection ? ' for introspection' : ''}).`, {
                nodes: [node],
                extensions: { code: 'query_too_deep' },
              }) as Parameters<ValidationContext['reportError']>[0],
            );
            return;
          }
        }
      },
    };
  };
}

/** Adds the depth rule to Yoga's validation (results are cached per document, which suits a pure rule). */
export function useDepthLimit(limits: DepthLimits): Plugin {
  const rule = depthLimitRule(limits);
  return {
    onValidate({ addValidationRule }) {
      addValidationRule(rule);
    },
  };
}
