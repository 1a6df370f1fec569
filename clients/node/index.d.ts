// The Node client's types: the contract's (contract/symorva.d.ts), plus how to start one.
import type {
  CommunityClient, ContractError, HostHandlers, LiveObservable, MethodName, Methods, Paths,
} from "../../contract/symorva";
export * from "../../contract/symorva";

export interface StartOptions {
  /** The `symorva` executable (default: $SYMORVA_BIN, else `symorva` on the PATH). */
  executable?: string;
  /** The community manifest. */
  manifest: string;
  /** Where the client keeps its accounts. */
  dataDirectory: string;
  /** The host's answers to the consent sheet and PIN entry. */
  handlers?: HostHandlers;
  /** Standard error of the child (default "inherit"). */
  stderr?: "inherit" | "ignore" | "pipe";
  /** Extra environment for the child. */
  env?: Record<string, string>;
  /**
   * Checks every answer and update against contract/symorva.schema.json (default: $SYMORVA_VALIDATE_SCHEMA
   * is "1"): a result the schema refuses rejects its request with a SchemaViolation, and close() throws
   * when any message was refused.
   */
  validate?: boolean;
}

/** A message the contract's JSON Schema refuses; `where` points into it. */
export declare class SchemaViolation extends Error {
  readonly where: string;
}

/** A rejected request: the contract's typed error. */
export declare class SymorvaError extends Error {
  readonly domain: ContractError["domain"];
  readonly code: string;
  readonly details?: Record<string, unknown>;
}

export declare class Client implements CommunityClient {
  static start(options: StartOptions): Promise<Client>;
  readonly session: CommunityClient["session"];
  readonly chat: CommunityClient["chat"];
  readonly meetings: CommunityClient["meetings"];
  readonly wallet?: CommunityClient["wallet"];
  readonly aiStudio?: CommunityClient["aiStudio"];
  readonly directory?: CommunityClient["directory"];
  readonly publicRooms: CommunityClient["publicRooms"];
  readonly push: CommunityClient["push"];
  readonly encryption: CommunityClient["encryption"];
  /** Sends one request and resolves with its result (rejects with a SymorvaError). */
  request<M extends MethodName>(method: M, params?: Methods[M]["params"]): Promise<Methods[M]["result"]>;
  /** Subscribes to an observable path; resolves once the first value is there. */
  observe<P extends keyof Paths>(path: P, params?: Paths[P]["params"]): Promise<LiveObservable<Paths[P]["value"]>>;
  /** The messages the schema refused (when validating). */
  readonly schemaViolations: string[];
  /** Ends standard input and waits for the child to exit; throws when the schema refused a message. */
  close(): Promise<void>;
}
