import type { ASTNode, FragmentDefinitionNode, SelectionSetNode, ValidationContext, ASTVisitor } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';

export interface DepthLimits {
  /** Deepest field nesting of an operation (schema fields). */
  readonly maxDepth: number;
  /** Introspection (`__schema`, `__type`) is cyclic; tooling needs ~12 levels, so it gets its own cap. */
  readonly maxIntrospectionDepth: number;
}

/**
 * Depth of a selection set, following fragments; `limit` stops the walk early (so a hostile document
 * costs no more than the limit to measure). Fragment cycles are reported by graphql's own rules.
 */
function depthOf(set: SelectionSetNode | undefined, fragments: Map<string, FragmentDefinitionNode>, seen: Set<string>, limit: number): number {
  if (!set || limit <= 0) return 0;
  let max = 0;
  for (const sel of set.selections) {
    let d = 0;
    if (sel.kind === 'Field') d = 1 + depthOf(sel.selectionSet, fragments, seen, limit - 1);
    else if (sel.kind === 'InlineFragment') d = depthOf(sel.selectionSet, fragments, seen, limit);
    else if (sel.kind === 'FragmentSpread' && !seen.has(sel.name.value)) {
      const frag = fragments.get(sel.name.value);
      seen.add(sel.name.value);
      d = depthOf(frag?.selectionSet, fragments, seen, limit);
      seen.delete(sel.name.value);
    }
    if (d > max) max = d;
    if (max > limit) break;
  }
  return max;
}

/** A validation rule refusing operations nested deeper than the limits, with a clear message. */
export function depthLimitRule(limits: DepthLimits) {
  return (context: ValidationContext): ASTVisitor => {
    const doc = context.getDocument();
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const def of doc.definitions) if (def.kind === 'FragmentDefinition') fragments.set(def.name.value, def);
    return {
      OperationDefinition(node: ASTNode) {
        if (node.kind !== 'OperationDefinition') return;
        for (const sel of node.selectionSet.selections) {
          const introspection = sel.kind === 'Field' && sel.name.value.startsWith('__');
          const max = introspection ? limits.maxIntrospectionDepth : limits.maxDepth;
          const depth = depthOf({ kind: node.selectionSet.kind, selections: [sel] } as SelectionSetNode, fragments, new Set(), max + 1);
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
