// The parameters of the action kinds, as stored with each action (`actions.params`) and repeated
// by a retry (CONTRACT §7). Each kind registers its schema with the action engine
// (`ActionEngine.register({ …, params })`), which checks parameters when an action is enqueued
// and again when a stored action is run or retried.
import { type Static, Type } from "typebox";

/** A Berth uuid (the object an action works on). */
const Id = (description: string) => Type.String({ minLength: 1, maxLength: 64, description });

/** `service.start|stop|scale|redeploy`. */
export const ServiceActionParams = Type.Object({
  service: Id("the service's uuid"),
  reuse_volumes: Type.Optional(Type.Boolean({ description: "redeploy: keep the containers' volumes" })),
  new_nodes: Type.Optional(
    Type.Boolean({ description: "scale of an EVERY_NODE service onto new nodes (the reconciler's)" }),
  ),
});
export type ServiceActionParams = Static<typeof ServiceActionParams>;

/** `service.rollback`: the revision is resolved when the call is made, so a retry goes to the same one. */
export const ServiceRollbackParams = Type.Object({
  service: Id("the service's uuid"),
  revision: Type.Integer({ minimum: 1, description: "the kept revision the service goes back to" }),
  reuse_volumes: Type.Optional(Type.Boolean({ description: "keep the containers' volumes" })),
});
export type ServiceRollbackParams = Static<typeof ServiceRollbackParams>;

/** `service.terminate`. */
export const ServiceTerminateParams = Type.Object({ service: Id("the service's uuid") });
export type ServiceTerminateParams = Static<typeof ServiceTerminateParams>;

/** `container.start|stop|redeploy|terminate`. */
export const ContainerActionParams = Type.Object({
  container: Id("the container's uuid"),
  reuse_volumes: Type.Optional(Type.Boolean({ description: "redeploy: keep the container's volumes" })),
});
export type ContainerActionParams = Static<typeof ContainerActionParams>;

/** `stack.start|stop|redeploy|terminate`. */
export const StackActionParams = Type.Object({
  stack: Id("the stack's uuid"),
  reuse_volumes: Type.Optional(Type.Boolean({ description: "redeploy: keep the containers' volumes" })),
});
export type StackActionParams = Static<typeof StackActionParams>;

/** `nodecluster.deploy|terminate`. */
export const ClusterActionParams = Type.Object({ cluster: Id("the node cluster's uuid") });
export type ClusterActionParams = Static<typeof ClusterActionParams>;

/** `nodecluster.scale`. */
export const ClusterScaleParams = Type.Object({
  cluster: Id("the node cluster's uuid"),
  target: Type.Integer({ minimum: 0, maximum: 10_000, description: "the number of nodes wanted" }),
});
export type ClusterScaleParams = Static<typeof ClusterScaleParams>;

/** `node.terminate|engine-upgrade`. */
export const NodeActionParams = Type.Object({ node: Id("the node's uuid") });
export type NodeActionParams = Static<typeof NodeActionParams>;
