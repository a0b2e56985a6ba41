// Schemas of registries and external repositories (spec "Registry", "External repository";
// CONTRACT §1: repository names hold slashes). Credentials are taken on create and update and
// never answered.
import { type Static, Type } from "typebox";
import { Uri, View } from "./common.ts";

export const RegistryView = View(
  {
    uuid: Type.String(),
    resource_uri: Uri,
    name: Type.String({ description: "human-readable name" }),
    host: Type.String({ description: "FQDN of the registry" }),
    is_native_registry: Type.Boolean({ description: "run by Berth itself" }),
    is_tutum_registry: Type.Boolean({ description: "historical name of is_native_registry" }),
    is_ssl: Type.Boolean(),
    port: Type.Integer(),
  },
  "a registry (spec Registry)",
);
export type Registry = Static<typeof RegistryView>;

export const RepositoryView = View(
  {
    uuid: Type.String(),
    resource_uri: Uri,
    name: Type.String({ description: "<registry host>/<path>" }),
    in_use: Type.Boolean({ description: "used by any of the namespace's services" }),
    registry: Uri,
  },
  "an external repository (spec External repository)",
);
export type Repository = Static<typeof RepositoryView>;

export const RepositoryCreateBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255, description: "<registry host>/<path>" }),
    username: Type.Optional(Type.String({ maxLength: 1024 })),
    password: Type.Optional(Type.String({ maxLength: 8192 })),
  },
  { description: "Create external repository" },
);
export type RepositoryCreateBody = Static<typeof RepositoryCreateBody>;

export const RepositoryUpdateBody = Type.Object(
  {
    username: Type.Optional(Type.String({ maxLength: 1024 })),
    password: Type.Optional(Type.String({ maxLength: 8192 })),
  },
  { description: "Update external repository (its credentials)" },
);
export type RepositoryUpdateBody = Static<typeof RepositoryUpdateBody>;
