// What a user made in a namespace acts only while that user may use the namespace (issue 26 item
// 3): a registration token registers a node, and a trigger URL starts its operation, only while
// their creator is active and the namespace is theirs or one of their organizations'. Removing a
// member also revokes what they made there (accounts/access-ends.ts); this check holds in between,
// on every replica, and for a creator deactivated (while deactivated).
import type { Store } from "../store/store.ts";

/**
 * Whether the user with that id is active and may use `namespace`. A null id (a token or trigger
 * made before creators were recorded, whose creator is unknown) keeps working as before.
 */
export async function creatorMayUse(
  store: Store,
  creatorId: number | null,
  namespace: string,
): Promise<boolean> {
  if (creatorId === null) return true;
  const user = await store.identity.findUserById(creatorId);
  if (!user?.is_active) return false;
  if (user.username === namespace) return true;
  return (await store.identity.membership(namespace, user.username)) !== undefined;
}
