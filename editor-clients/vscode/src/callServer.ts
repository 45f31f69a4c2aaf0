/** Calls one of the server's own commands (`agentLsp.*`) over `workspace/executeCommand`. */
import { ExecuteCommandRequest, LanguageClient } from 'vscode-languageclient/node';

export type GetClient = () => Promise<LanguageClient>;

export async function callServer<T>(client: LanguageClient, command: string, arg: object): Promise<T> {
  return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [arg] })) as T;
}
