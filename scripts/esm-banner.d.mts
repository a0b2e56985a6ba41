export declare const ESM_BANNER: string;
