// The GraphQL documents the console sends, in one place.

export const ME = `query Me { me { restId name kind } }`;

const DECISION_CARD = `
fragment Card on Decision {
  restId projectId question options status requiredActor recommendation reversible generation createdAt
  createdBy { name kind }
  current {
    at expiresAt environment conditions policyRevision
    actor { name kind }
    answer { disposition answer timedOut at actor { name kind } }
    affected { taskId pinnedRevision currentRevision task { restId title } }
  }
}`;

const INBOX_PROJECT = `
fragment InboxProject on Project {
  restId name
  policy { revision }
  digest {
    readyTaskCount
    timingOutSoon { ...Card }
    proceededByTimeout { ...Card }
    blockedTasks {
      restId title status priority
      blockedBy { decisionIds decisionsTruncated decisions { ... on Decision { restId question } } dependencies { restId title } }
    }
    truncated { timingOutSoon proceededByTimeout blockedTasks }
  }
  awaiting: decisions(status: PENDING, first: 100) { totalCount nodes { ...Card } }
  stale: decisions(status: STALE, first: 50) { totalCount nodes { ...Card } }
  expired: decisions(status: EXPIRED, first: 50) { totalCount nodes { ...Card } }
}
${DECISION_CARD}`;

// every project: the console walks the pages (api.js allNodes)
const PAGE_INFO = "pageInfo { hasNextPage endCursor }";

export const INBOX = `
query Inbox($after: String) {
  projects(first: 50, after: $after) { ${PAGE_INFO} edges { node { ...InboxProject } } }
}
${INBOX_PROJECT}`;

// the same, one project at a time: for an inbox too large for one query
// (the service's execution limit, docs/graphql.md)
export const INBOX_PROJECT_IDS = `query InboxProjects($after: String) {
  projects(first: 100, after: $after) { ${PAGE_INFO} edges { node { restId name } } } }`;
export const INBOX_ONE_PROJECT = `
query InboxProject($id: String!) { project(id: $id) { ...InboxProject } }
${INBOX_PROJECT}`;

const ANSWER = `
fragment Answer on DecisionAnswer {
  disposition answer rationale conditionsConfirmed relayed timedOut at actorSessionId
  relay { prompt response } relayPolicyRevision
  actor { name kind } authorizedBy { name }
}`;

const GENERATIONS = `
fragment Generations on DecisionGenerationConnection {
  pageInfo { hasNextPage endCursor }
  edges { node {
    generation policyRevision environment conditions expiresAt reopenRationale at
    actor { name kind }
    answer { ...Answer }
    affected { taskId pinnedRevision }
  } }
}
${ANSWER}`;

export const DECISION = `
query Decision($project: String!, $id: String!) {
  project(id: $project) {
    restId name
    policy { revision rules }
    policyHistory(first: 100) {
      pageInfo { hasNextPage endCursor }
      edges { node { revision rules at actor { name } } }
    }
    decision(id: $id) {
      restId question options rationale status workAllowed requiredActor recommendation
      reversible generation createdAt
      createdBy { name kind }
      current {
        generation policyRevision environment conditions expiresAt reopenRationale at
        actor { name kind }
        answer { ...Answer }
        affected {
          taskId pinnedRevision currentRevision
          task {
            restId title status revision
            revisions(first: 100) { edges { node {
              revision title description acceptanceCriteria kind priority
              changedFields at actor { name }
            } } }
          }
        }
      }
      generations(first: 100) { ...Generations }
    }
  }
}
${GENERATIONS}`;

// the older generations of a decision reopened more than 100 times
export const DECISION_GENERATIONS = `
query DecisionGenerations($project: String!, $id: String!, $after: String) {
  project(id: $project) { decision(id: $id) { generations(first: 100, after: $after) { ...Generations } } }
}
${GENERATIONS}`;

export const ANSWER_DECISION = `
mutation Answer($input: DecisionAnswerInput!) {
  decisionAnswer(input: $input) {
    decision { restId status generation }
    userErrors { code field message reason }
    replayed
  }
}`;

export const REOPEN_DECISION = `
mutation Reopen($input: DecisionReopenInput!) {
  decisionReopen(input: $input) {
    decision { restId status generation }
    userErrors { code field message reason }
    replayed
  }
}`;

export const PROJECTS = `query Projects($after: String) {
  projects(first: 100, after: $after) { ${PAGE_INFO} edges { node { restId name } } } }`;

// a project's name alone: for a page whose own query was refused
export const PROJECT_NAME = `query ProjectName($project: String!) { project(id: $project) { restId name } }`;

export const KNOWLEDGE_LIST = `
query Knowledge($project: String!, $kind: KnowledgeKind, $status: KnowledgeStatus,
                $tag: String, $q: String, $shared: Boolean!, $after: String) {
  project(id: $project) {
    restId name
    knowledge(kind: $kind, status: $status, tag: $tag, q: $q, includeShared: $shared,
              first: 25, after: $after) {
      edges { node {
        restId projectId title kind status revision updatedAt tags collection
        feedbackTotals { useful notUseful }
      } }
      pageInfo { hasNextPage endCursor }
    }
  }
}`;

export const KNOWLEDGE_ITEM = `
query KnowledgeItem($project: String!, $id: String!, $after: String) {
  project(id: $project) {
    restId
    knowledgeItem(id: $id) {
      restId projectId title body kind status collection shareAcrossProjects revision
      createdAt updatedAt tags applicability supersededById
      scope { taskIds components environments versions }
      provenance { summary sourceUri sourceTaskId recordedAt actor { name kind } }
      feedbackTotals { useful notUseful }
      revisions(first: 100, after: $after) { pageInfo { hasNextPage endCursor } edges { node {
        revision title body status tags applicability supersededById
        scope { taskIds components environments versions }
        provenance { summary sourceUri sourceTaskId recordedAt actor { name kind } }
        feedback { useful notUseful }
      } } }
    }
  }
}`;

export const POLICY = `
query Policy($project: String!, $after: String) {
  project(id: $project) {
    restId name
    policy { revision }
    policyHistory(first: 100, after: $after) { pageInfo { hasNextPage endCursor } edges { node {
      revision rules agentRuleEditing allowRelayedHumanAnswers integrationOwnerId
      leaseSeconds reviewMode actorId actorKind at provenance actor { name kind }
    } } }
  }
}`;

export const DECISION_VERSION = `
query DecisionVersion($project: String!, $id: String!) {
  project(id: $project) {
    policy { revision }
    decision(id: $id) {
      generation status
      current {
        actorId reopenRationale answer { at disposition answer rationale actorId }
        affected { taskId currentRevision }
      }
    }
  }
}`;

export const DECISION_LIST = `
query Decisions($project: String!, $status: DecisionStatus, $after: String) {
  project(id: $project) {
    restId name
    decisions(status: $status, first: 25, after: $after) {
      edges { node {
        restId question status generation requiredActor reversible createdAt
        current { at expiresAt answer { disposition answer at } }
      } }
      pageInfo { hasNextPage endCursor }
    }
  }
}`;
