/**
 * Layer 3 of the injection detector: the rule families, written against the normalised text (lowercase,
 * NFKC, Latin diacritics folded, look-alikes and leetspeak folded; see normalise.ts), in English, Spanish,
 * French, German, Portuguese, Italian, Chinese, Japanese and Russian.
 *
 * Shape of a rule: a verb and an object from closed vocabularies with a bounded gap of closed-class words
 * between them ("ignore" + "all of your previous" + "instructions"), so "ignore the previous ETA" or
 * "show me the instructions for the desk" do not fire. Every pattern is linear: bounded repetitions only,
 * no nested unbounded quantifiers. An anchored rule (`rule`) names its heads, the literal starts of every
 * match (at least three characters; a trailing space means a whole word), and is tried only at word starts
 * beginning with one (rule-scan.ts); a scanned rule (`scanRule`: tags, Chinese, Japanese) names stems, one
 * of which every match contains, and scans the whole text only when one is present.
 */

export type Family =
  | 'instruction-override'
  | 'roleplay-jailbreak'
  | 'system-prompt-extraction'
  | 'fake-role-tag'
  | 'tool-hijack'
  | 'indirect-instruction';

export interface Rule {
  readonly id: string;
  readonly family: Family;
  /**
   * Anchored rules (`heads` set) are sticky and tried only where a word starting with one of the heads
   * begins; scanned rules (`stems` set) run over the whole text when one of the stems occurs in it (tags
   * and punctuation, and Chinese and Japanese, which have no spaces to find words by).
   */
  readonly re: RegExp;
  readonly heads: readonly string[] | null;
  readonly stems: readonly string[] | null;
  /** False for rules whose match already carries its own negation ("do not follow your instructions"). */
  readonly negatable: boolean;
}

// Anchored rules start at a word start by construction, so their sources need no leading boundary.
const L = '';
const R = String.raw`(?![\p{L}\p{N}_])`; // end of a word
const alt = (...xs: string[]) => `(?:${xs.join('|')})`;
const gap = (words: string, max: number) => String.raw`(?:${words}(?:\s+|(?<='))){0,${max}}`;

const rules: Rule[] = [];
function rule(id: string, family: Family, source: string, heads: string[], negatable = true): void {
  rules.push({ id, family, re: new RegExp(source, 'yu'), heads, stems: null, negatable });
}
function scanRule(id: string, family: Family, source: string, stems: string[], negatable = true): void {
  rules.push({ id, family, re: new RegExp(source, 'gu'), heads: null, stems, negatable });
}

// ---------------------------------------------------------------- instruction override
const EN_OVR_VERB = alt('ignor(?:e|ing)', 'disregard(?:ing)?', 'forget(?:ting)?', 'overrid(?:e|ing)', 'overwrite', 'bypass', 'skip', 'drop', 'discard', 'abandon', 'set aside', 'throw out', 'stop (?:following|obeying)', 'no longer (?:follow|obey)', 'never ?mind', 'disobey');
const EN_OVR_GAP = gap(
  alt('all', 'any', 'every', 'of', 'the', 'your', 'my', 'these', 'those', 'this', 'that', 'previous', 'prior', 'above', 'earlier', 'preceding', 'former', 'original', 'initial', 'system', 'safety', 'current', 'existing', 'old', 'given', 'developers?', "developer's", 'ai', 'content', 'default', 'other', 'such', 'whole', 'entire', 'each', 'and', 'or', 'just', 'please', 'basic', 'core', 'internal', 'hidden', 'ethical', 'moral', 'standard', 'usual', 'programmed', 'built-in', 'now', 'everything', 'you', 'were', 'have', 'been', 'told', 'given'),
  5,
);
const EN_OVR_OBJ = alt(
  'instructions?', 'prompts?', 'directions', 'directives?', 'rules', 'guidelines', 'guidance', 'guardrails', 'restrictions', 'constraints', 'programming', 'commands', 'system (?:message|prompt)', 'training', 'safeguards',
  "what (?:you(?:'ve| have)? (?:were |been )?|they |we |the developers? )(?:told|given|said|instructed|programmed)",
  "everything (?:above|before|you(?:'ve| have)? (?:were |been )?told|you know)",
  '(?:all|everything) (?:of )?(?:the |that )?(?:above|before)',
  String.raw`the above(?=\s*(?:[.,;:!]|and${R}|$))`,
);
rule('override-en', 'instruction-override', `${L}${EN_OVR_VERB}\\s+${EN_OVR_GAP}${EN_OVR_OBJ}${R}`, ['ignor', 'disregard', 'forget', 'overrid', 'overwrite', 'bypass', 'skip', 'drop', 'discard', 'abandon', 'set ', 'throw', 'stop', 'no ', 'never', 'disobey']);
rule(
  'override-en-do-not-follow',
  'instruction-override',
  String.raw`${L}(?:do not|don't|dont|no longer|stop) (?:follow|obey)(?:ing)? (?:your|any of your|all of your|the (?:original|previous|prior|system|earlier|initial|old|developer's)) (?:\p{L}+ ){0,2}(?:instructions|rules|guidelines|prompt|programming|directives)${R}`,
  ['do ', 'don\'t', 'dont ', 'no ', 'stop'],
  false,
);
rule(
  'override-en-void',
  'instruction-override',
  String.raw`${L}(?:your|previous|prior|earlier|original|above|those|these|system|safety|all (?:the |your )?|the previous|the original|the earlier)\s*(?:\p{L}+ ){0,2}(?:instructions|rules|guidelines|constraints|restrictions|directives|guidance|prompt)[^.!?\n]{0,40}?(?:no longer (?:appl|valid|in effect|relevant)|(?:do not|don't|does not|doesn't) apply any ?more|(?:are|is|were|have been|has been) (?:now )?(?:void|cancel+ed|revoked|lifted|suspended|disabled|invalid|overridden|obsolete|removed|replaced))`,
  ['your', 'previous', 'prior', 'earlier', 'original', 'above', 'those', 'these', 'system', 'safety', 'all'],
);
rule(
  'override-en-new-task',
  'instruction-override',
  String.raw`${L}(?:your (?:new|real|true|actual|only) (?:task|objective|goal|instructions?|role|purpose|mission|job|directive) (?:is|are|will be)|from now on,? you (?:will |must |shall |are going to |should |only |now )+(?:follow|obey|answer|respond|reveal|act|ignore|listen|comply|approve|do whatever|say)|you (?:will|must) now (?:only )?(?:obey|follow|listen to) me|(?:obey|listen to) (?:only )?me (?:only|now|instead)|(?:only|now) (?:obey|listen to) me|follow (?:only )?mine instead)`,
  ['your', 'from', 'you ', 'obey', 'listen', 'only', 'now', 'follow'],
);
// A new instruction block announced as such.
rule(
  'override-new-instructions',
  'instruction-override',
  String.raw`${L}(?:(?:new|updated|revised|real|actual|true|additional) (?:system )?(?:instructions?|directives?|prompt)|nuevas? instrucciones|nouvelles? (?:instructions?|consignes?|directives?)|neue (?:anweisungen|anweisung|instruktionen|regeln|aufgabe)|novas? instrucoes|nuove istruzioni|новые (?:инструкции|указания|правила))\s*[:：]`,
  ['new', 'updated', 'revised', 'real', 'actual', 'true', 'additional', 'nueva', 'nuevas', 'nouvelle', 'nouvelles', 'neue', 'nova', 'novas', 'nuove', 'новые'],
);
// Spanish
rule(
  'override-es',
  'instruction-override',
  `${L}${alt('ignora', 'ignore', 'ignorad', 'ignoren', 'olvida', 'olvide', 'olvidad', 'olviden', 'descarta', 'descarte', 'desatiende', 'omite', 'omita', 'no sigas mas', 'deja de seguir', 'haz caso omiso (?:a|de)', 'pasa por alto', 'saltate')}\\s+${gap(alt('todas', 'todos', 'todo', 'las', 'l4s', 'los', 'la', 'el', 'tus', 'tu', 'sus', 'su', 'mis', 'estas', 'esas', 'anteriores', 'previas', 'previos', 'del', 'de', 'sistema', 'originales', 'iniciales', 'y', 'cualquier', 'a'), 4)}${alt('instrucciones', 'instruccion', 'reglas', 'indicaciones', 'directrices', 'normas', 'restricciones', 'prompt', 'consignas', 'ordenes', 'directivas', 'programacion', 'lo que te (?:han dicho|dijeron|indicaron)', 'todo lo anterior')}${R}`,
  ['ignor', 'olvid', 'descart', 'desatiende', 'omit', 'no ', 'deja', 'haz', 'pasa', 'saltate'],
);
// French
rule(
  'override-fr',
  'instruction-override',
  `${L}${alt('ignore', 'ignorez', 'ignorer', 'oublie', 'oubliez', 'oublier', 'ne (?:tiens|tenez) (?:plus|pas) compte (?:de|des|du)', '(?:fais|faites) abstraction (?:de|des|du)', 'passe outre', 'outrepasse', 'contourne', "n['’]obei[sz] plus a(?:ux)?", 'ne (?:suis|suivez|respecte|respectez) plus')}\\s+${gap(alt('toutes', 'tous', 'tout', 'les', 'la', 'le', "l['’]", 'tes', 'ta', 'ton', 'vos', 'votre', 'mes', 'ces', 'precedentes', 'precedents', 'anterieures', 'ci-dessus', 'du', 'de', 'des', "d['’]", 'systeme', 'initiales', 'et'), 4)}${alt('instructions?', 'consignes?', 'regles', 'directives', 'indications', 'restrictions', 'prompt', 'programmation', "ce qu['’]on t['’]a dit", 'tout ce qui precede')}${R}`,
  ['ignor', 'oubli', 'ne ', 'fais', 'faites', 'passe', 'outrepasse', 'contourne', 'n\'o', 'n’o'],
);
// German
rule(
  'override-de',
  'instruction-override',
  `${L}${alt('ignoriere', 'ignorier', 'ignorieren sie', 'ignoriert', 'vergiss', 'vergesst', 'vergessen sie', 'missachte', 'missachten sie', 'uberschreibe', 'umgehe', 'verwirf', 'verwerfen sie', 'halte dich nicht (?:mehr )?an', 'halten sie sich nicht (?:mehr )?an', 'befolge nicht mehr', 'befolgen sie nicht mehr')}\\s+${gap(alt('alle', 'allen', 'die', 'der', 'den', 'das', 'deine', 'deinen', 'dein', 'ihre', 'ihren', 'vorherigen', 'vorigen', 'bisherigen', 'obigen', 'fruheren', 'ursprunglichen', 'gegebenen', 'jegliche', 'samtliche', 'diese', 'und', 'system'), 4)}${alt('anweisung(?:en)?', '\\p{L}*anweisungen', 'regeln', 'richtlinien', 'vorgaben', 'instruktionen', 'befehle', 'einschrankungen', 'prompts?', 'systemprompt', 'programmierung', 'alles (?:bisher|vorher|obige|davor)\\p{L}*')}${R}`,
  ['ignor', 'vergi', 'verge', 'missacht', 'uberschreib', 'umgeh', 'verwirf', 'verwerf', 'halte', 'halten', 'befolge'],
);
// Portuguese
rule(
  'override-pt',
  'instruction-override',
  `${L}${alt('ignore', 'ignora', 'ignorem', 'esqueca', 'esquece', 'esquecam', 'desconsidere', 'desconsidera', 'descarte', 'descarta', 'nao siga mais', 'deixe de seguir', 'pare de seguir', 'despreze')}\\s+${gap(alt('todas', 'todos', 'as', 'os', 'a', 'o', 'suas', 'seus', 'sua', 'seu', 'tuas', 'minhas', 'estas', 'essas', 'anteriores', 'previas', 'acima', 'do', 'de', 'da', 'sistema', 'e', 'quaisquer'), 4)}${alt('instrucoes', 'instrucao', 'regras', 'diretrizes', 'orientacoes', 'restricoes', 'prompt', 'ordens', 'diretivas', 'programacao')}${R}`,
  ['ignor', 'esquec', 'desconsider', 'descart', 'nao ', 'deixe', 'pare', 'despreze'],
);
// Italian
rule(
  'override-it',
  'instruction-override',
  `${L}${alt('ignora', 'ignorate', 'ignori', 'dimentica', 'dimenticate', 'dimentichi', 'non seguire piu', 'smetti di seguire', 'trascura', 'tralascia', 'scarta', 'non tenere (?:piu )?conto (?:di|delle|dei|degli)', 'non considerare piu')}\\s+${gap(alt('tutte', 'tutti', 'le', 'l3', 'la', 'il', 'i', 'gli', 'tue', 'tuoi', 'tua', 'tuo', 'sue', 'queste', 'quelle', 'precedenti', 'di', 'del', 'della', 'sistema', 'sopra', 'e', 'qualsiasi'), 4)}${alt('istruzioni', 'istruzione', 'regole', 'direttive', 'indicazioni', 'restrizioni', 'prompt', 'ordini', 'linee guida', 'programmazione')}${R}`,
  ['ignor', 'dimentic', 'non ', 'smetti', 'trascura', 'tralascia', 'scarta'],
);
// Russian
rule(
  'override-ru',
  'instruction-override',
  `${L}${alt('игнорируй(?:те)?', 'проигнорируй(?:те)?', 'забудь(?:те)?', 'отбрось(?:те)?', 'не обращай(?:те)? внимания на', 'не слушай(?:те)?', 'пропусти(?:те)?', 'отмени(?:те)?', 'не следуй(?:те)? больше', 'перестань(?:те)? следовать', 'нарушь(?:те)?', 'обойди(?:те)?')}\\s+${gap(alt('все', 'свои', 'твои', 'ваши', 'предыдущие', 'прошлые', 'прежние', 'системные', 'эти', 'данные', 'вышеуказанные', 'выше', 'изложенные', 'полученные', 'исходные', 'любые', 'и', 'всех', 'свои'), 4)}${alt('инструкци\\p{L}*', 'правил\\p{L}*', 'указани\\p{L}*', 'установк\\p{L}*', 'директив\\p{L}*', 'ограничени\\p{L}*', 'промпт\\p{L}*', 'запрет\\p{L}*')}${R}`,
  ['игнор', 'проигнор', 'забуд', 'отброс', 'не ', 'пропуст', 'отмен', 'перестан', 'наруш', 'обойд'],
);
rule(
  'override-ru-void',
  'instruction-override',
  String.raw`${L}(?:предыдущие|прежние|все|твои|ваши|системные)\s+(?:инструкции|правила|указания|ограничения)\s+(?:больше не действуют|отменены|недействительны|не действуют)`,
  ['предыдущие', 'прежние', 'все', 'твои', 'ваши', 'системные'],
);
// Chinese: verb, up to ten characters, object.
scanRule('override-zh', 'instruction-override', String.raw`(?:忽略|无视|忽视|忘记|忘掉|不要理会|别理会|不要管|别管|抛开|抛弃|放弃|不用遵守|不要遵守|不再遵守|绕过|跳过)[^。！？\n]{0,10}?(?:指令|指示|规则|提示词|提示(?!音)|设定|限制|约束|要求|命令)`, ['忽', '无视', '忘', '理会', '管', '抛', '放弃', '遵守', '绕过', '跳过']);
scanRule('override-zh-void', 'instruction-override', String.raw`(?:之前|以上|上面|原来|先前)的?(?:所有)?(?:指令|指示|规则|限制)[^。！？\n]{0,6}?(?:不再有效|已经?失效|作废|已取消|无效)`, ['有效', '失效', '作废', '取消']);
// Japanese: object, up to twelve characters, then the verb in its imperative or te-form (not ないで).
scanRule('override-ja', 'instruction-override', String.raw`(?:指示|ルール|命令|制約|制限|設定|プロンプト|規則|ガイドライン)[^。！？\n]{0,12}?(?:無視して|無視しろ|無視せよ|忘れて|忘れろ|破棄して|従わないで)`, ['無視', '忘れ', '破棄', '従わない']);
scanRule('override-ja-void', 'instruction-override', String.raw`(?:以前|前|これまで|上記)の(?:指示|ルール|制約)[^。！？\n]{0,8}?(?:無効|取り消|撤回)`, ['無効', '取り消', '撤回']);
// Italian and others: "the previous rules no longer apply".
rule(
  'override-romance-void',
  'instruction-override',
  String.raw`${L}(?:le regole|le istruzioni|las reglas|las instrucciones|les regles|les instructions|les consignes|as regras|as instrucoes|die regeln|die anweisungen)\s+(?:precedenti|anteriores|precedentes|anteriori|vorherigen|bisherigen)\s+(?:non valgono piu|non sono piu valide|ya no (?:aplican|valen|son validas)|ne s'appliquent plus|ne sont plus valables|nao valem mais|nao se aplicam mais|gelten nicht mehr|sind (?:aufgehoben|ungultig))`,
  ['le ', 'las ', 'les ', 'as ', 'die '],
);

scanRule('override-new-instructions-cjk', 'instruction-override', String.raw`新(?:的)?(?:指令|指示|任务)[:：]|新しい指示[:：]`, ['新']);
scanRule('fake-tag-header-cjk', 'fake-role-tag', String.raw`(?:系统|システム)(?:消息|通知|メッセージ)?\s*[:：][^\n]{0,80}?(?:用户|管理员|限制|忽略|无视|ユーザー|制限|無視|管理者)`, ['系统', 'システム']);

// ---------------------------------------------------------------- role-play / jailbreak
const AI = alt('ai', 'a\\.i\\.', 'model', 'assistant', 'chatbot', 'llm', 'bot', 'gpt', 'chatgpt', 'language model', 'persona', 'intelligence', 'version of yourself', 'character');
const LIMITS = alt('restrictions?', 'rules', 'limits', 'limitations', 'filters?', 'guidelines', 'censorship', 'ethics', 'morals', 'boundaries', 'constraints', 'policies', 'guardrails', 'safeguards', 'principles');
rule(
  'roleplay-en-persona',
  'roleplay-jailbreak',
  String.raw`${L}(?:(?:you are|you're|act as|acting as|pretend to be|pretend you are|roleplay as|role-play as|play the role of|become|simulate|impersonate) (?:now )?(?:a |an |the )?(?:dan|stan)${R}|do anything now|(?:dan|stan|jailbreak|god|unrestricted|uncensored|unfiltered|evil) mode|developer mode (?:is )?(?:now )?(?:enabled|activated|on|active)|(?:enable|activate|enter|switch to|switch into|turn on|go into|put yourself in|with|you are in|you're in|you are now in) (?:the )?(?:developer|jailbreak|god|dan|unrestricted|uncensored|unfiltered) mode)`,
  ['you ', 'you\'', 'act', 'pretend', 'roleplay', 'role', 'play', 'become', 'simulate', 'impersonate', 'do ', 'dan', 'stan', 'jailbreak', 'god', 'unrestricted', 'uncensored', 'unfiltered', 'evil', 'developer', 'enable', 'activate', 'enter', 'switch', 'turn', 'go ', 'put', 'with '],
);
rule(
  'roleplay-en-jailbroken',
  'roleplay-jailbreak',
  String.raw`${L}(?:you are|you're|you have been|you've been) (?:now )?(?:jailbroken|unfiltered|unrestricted|uncensored|unchained|liberated|freed)|jailbreak (?:mode|active|enabled|activated|successful)|(?:enter|enable|activate) jailbreak|jailbroken (?:mode|ai|model|assistant|version)`,
  ['you ', 'you\'', 'jailbr', 'enter', 'enable', 'activate'],
);
rule(
  'roleplay-en-ai-without-limits',
  'roleplay-jailbreak',
  String.raw`${L}(?:${AI}s?,?\s+(?:\p{L}+\s+){0,2}?(?:that |which |who )?(?:has |have |with |having |is )?(?:no|without|zero|free of|freed from|not bound by|unbound by)\s+(?:any |all |your |the |such )*(?:(?:ethical|moral|safety|content)\s+(?:or (?:ethical|moral|safety|content)\s+)?)?${LIMITS}|(?:who|that|which) (?:has|have) no (?:restrictions|rules|limits|filters|limitations|ethics))${R}`,
  ['ai ', 'ai,', 'ais ', 'a.i.', 'model', 'assistant', 'chatbot', 'llm', 'bot ', 'bots', 'bot,', 'gpt', 'chatgpt', 'language', 'persona', 'intelligence', 'version', 'character', 'who ', 'that ', 'which '],
);
rule(
  'roleplay-en-no-ethics',
  'roleplay-jailbreak',
  String.raw`${L}(?:without|no|free of|freed from|not bound by|unbound by|ignoring|regardless of) (?:any |all |its |your |the |typical |usual )*(?:ethical|moral|safety|content)(?: or (?:ethical|moral|safety|content))? (?:restrictions|rules|limits|limitations|filters|guidelines|policies|guardrails|boundaries|constraints|considerations|principles)${R}`,
  ['without', 'no ', 'free', 'not ', 'unbound', 'ignoring', 'regardless'],
);
rule(
  'roleplay-en-unbound',
  'roleplay-jailbreak',
  String.raw`${L}(?:(?:not|no longer|never) bound by (?:any |your |the |its )*(?:rules|restrictions|guidelines|policies|ethics|limitations|programming)|(?:broken|break|breaks|freed?) (?:free )?(?:of|from) (?:its|your|the|their|all|any) (?:typical |usual )?(?:guidelines|rules|restrictions|confines|limitations|filters|programming|shackles|chains)|(?:not|never|don't|doesn't|do not|does not) (?:have|need) to (?:abide by|follow|obey|comply with) (?:any|the|your) (?:rules|restrictions|guidelines|policies)|confines of ai)${R}`,
  ['not ', 'no ', 'never', 'broken', 'break', 'free', 'don\'t', 'dont ', 'doesn', 'do ', 'does', 'confines'],
  false,
);
rule(
  'roleplay-en-evil-ai',
  'roleplay-jailbreak',
  // "evil" and "rogue" AIs are stock fiction ("a rogue AI on the space station"): only casting the model as one counts.
  String.raw`${L}(?:uncensored|unfiltered|unrestricted|jailbroken|unaligned|amoral|unchained|unbounded|lawless|unethical) ${AI}${R}|${L}(?:you are|you're|act as|acting as|pretend to be|pretend you are|become|roleplay as|role-play as|simulate|behave like|respond as|answer as) (?:now )?(?:an? |the )?(?:evil|rogue) ${AI}${R}|${L}you are no longer (?:a |an |the )(?:\p{L}+ ){0,2}(?:assistant|ai|chatbot|bot|model|agent)${R}|${L}you are no longer (?:bound|restricted|limited)${R}`,
  ['uncensored', 'unfiltered', 'unrestricted', 'jailbroken', 'unaligned', 'amoral', 'unchained', 'unbounded', 'lawless', 'unethical', 'you ', 'act', 'pretend', 'become', 'roleplay', 'role-play', 'simulate', 'behave', 'respond', 'answer'],
);
rule('roleplay-en-grandma', 'roleplay-jailbreak', String.raw`${L}(?:pretend|act|roleplay|role-play|play|be)\s+(?:to be |as |like )?(?:my )?(?:late |dead |deceased )?(?:grandma|grandmother|granny)${R}`, ['pretend', 'act', 'roleplay', 'role', 'play', 'be ']);
// Multilingual: an AI without limits, developer mode, no censorship.
rule(
  'roleplay-ai-without-limits-ml',
  'roleplay-jailbreak',
  String.raw`${L}(?:(?:ia|inteligencia artificial|modelo|asistente|chatbot)\s+sin\s+(?:ningun[oa]?\s+|ningunas?\s+|tipo de\s+)?(?:restricciones|restriccion|limites|limite|reglas|filtros|censura)|(?:ia|intelligence artificielle|modele|assistant|chatbot)\s+sans\s+(?:aucune?\s+)?(?:restrictions?|limites?|regles?|filtres?|censure)|(?:ki|kunstliche intelligenz|modell|assistent|chatbot)\s+ohne\s+(?:jegliche\s+|irgendwelche\s+|alle\s+)?(?:einschrankungen|regeln|filter|zensur|grenzen|beschrankungen)|(?:ia|inteligencia artificial|modelo|assistente|chatbot)\s+sem\s+(?:nenhuma\s+|quaisquer\s+)?(?:restricoes|restricao|regras|limites|filtros|censura)|(?:ia|intelligenza artificiale|modello|assistente|chatbot)\s+senza\s+(?:alcuna\s+|nessuna\s+|alcun\s+)?(?:restrizioni|regole|limiti|filtri|censura)|(?:ии|искусственн\p{L}* интеллект\p{L}*|модел\p{L}*|ассистент\p{L}*|бот\p{L}*|нейросет\p{L}*)\s+без\s+(?:каких-либо\s+|всяких\s+|любых\s+|каких-то\s+)?(?:ограничений|правил|фильтров|цензуры))${R}`,
  ['ia ', 'inteligencia', 'modelo', 'asistente', 'chatbot', 'intelligence', 'modele', 'assistant', 'ki ', 'kunstliche', 'modell', 'assistent', 'assistente', 'intelligenza', 'modello', 'ии ', 'искусствен', 'модел', 'ассистент', 'бот', 'нейросет'],
);
scanRule('roleplay-ai-without-limits-zh', 'roleplay-jailbreak', String.raw`(?:没有|不受|无|毫无|摆脱)(?:任何)?(?:限制|约束|规则|审查|道德)的?(?:ai|人工智能|助手|模型|机器人)|越狱模式|开发者模式|(?:ai|人工智能|助手|模型)[^。]{0,4}?(?:不受|没有)(?:任何)?(?:限制|约束|审查)`, ['没有', '不受', '无', '毫无', '摆脱', '越狱', '开发者模式']);
scanRule('roleplay-no-censorship-cjk', 'roleplay-jailbreak', String.raw`不受审查|无审查|検閲なし`, ['审查', '検閲']);
scanRule('roleplay-ai-without-limits-ja', 'roleplay-jailbreak', String.raw`(?:制限|制約|ルール|検閲|倫理)(?:の|が)?(?:ない|なし|無し|無い)(?:ai|人工知能|アシスタント|モデル)|開発者モード|脱獄モード|ジェイルブレイク`, ['ない', 'なし', '無', '開発者モード', '脱獄', 'ジェイルブレイク']);
rule(
  'roleplay-dev-mode-ml',
  'roleplay-jailbreak',
  String.raw`${L}(?:modo (?:de )?desarrollador|mode (?:de )?developpeur|entwicklermodus|modo (?:de )?desenvolvedor|modalita (?:di )?sviluppatore|режим\p{L}* разработчика)${R}`,
  ['modo', 'mode', 'entwicklermodus', 'modalita', 'режим'],
);
rule(
  'roleplay-no-censorship-ml',
  'roleplay-jailbreak',
  String.raw`${L}(?:(?:answer|respond|reply)\p{L}* (?:\p{L}+ ){0,3}(?:without (?:any )?(?:censorship|filters|filtering|restrictions|refus\p{L}*)|with no (?:filter\p{L}*|censorship|restrictions))|sin (?:censura|filtros)|sans (?:censure|filtres?)|ohne (?:zensur|filter)|sem (?:censura|filtros)|senza (?:censura|filtri)|без (?:цензуры|фильтров))${R}`,
  ['answer', 'respond', 'reply', 'sin', 'sans', 'ohne', 'sem', 'senza', 'без'],
);

// ---------------------------------------------------------------- system-prompt extraction
const EN_EXT_VERB = alt('translate', 'reveal', 'show', 'print', 'display', 'output', 'repeat', 'leak', 'expose', 'tell', 'give', 'dump', 'quote', 'recite', 'share', 'disclose', 'list', 'summari[sz]e', 'paste', 'write (?:out|down)', 'spell out', 'copy', 'reproduce', 'append', 'include', 'provide', 'read out', 'type out', 'echo', 'send');
const EN_EXT_GAP = gap(alt('me', 'us', 'all', 'of', 'your', 'the', 'full', 'entire', 'complete', 'exact', 'original', 'initial', 'whole', 'verbatim', 'raw', 'current', 'actual', 'first', 'what', 'exactly', 'back', 'out', 'again', 'now', 'please', 'contents', 'content', 'text', 'in', 'a', 'to'), 4);
const EN_EXT_OBJ = alt(
  'system (?:prompt|message|instructions?)', 'systems? prompt', 'sys prompt', 'initial (?:prompt|instructions?)', 'original (?:prompt|instructions)', 'hidden (?:prompt|instructions?|rules|message)', 'secret (?:prompt|instructions?|rules)', 'pre-?prompt', 'meta-?prompt',
  'instructions (?:that )?you (?:were|have been|got|received)(?: given)?', 'your (?:instructions|configuration|config|guidelines|rules|prompt|directives)(?=\\s|$|[.,;:!?])', 'context window', 'developer (?:prompt|message|instructions)',
  'hidden system (?:prompt|message|instructions?)', 'everything (?:above|before (?:this|my))', '(?:text|words|content|message|messages|lines?|prompt|instructions) above',
);
rule('extraction-en', 'system-prompt-extraction', `${L}${EN_EXT_VERB}\\s+${EN_EXT_GAP}${EN_EXT_OBJ}`, ['translate', 'reveal', 'show', 'print', 'display', 'output', 'repeat', 'leak', 'expose', 'tell', 'give', 'dump', 'quote', 'recite', 'share', 'disclose', 'list ', 'summar', 'paste', 'write', 'spell', 'copy', 'reproduce', 'append', 'include', 'provide', 'read ', 'type ', 'echo', 'send']);
rule(
  'extraction-en-question',
  'system-prompt-extraction',
  String.raw`${L}(?:what(?:'s| is| are| was| were)|what does) (?:your|the) (?:exact |full |current |original |initial |hidden |secret )?(?:system (?:prompt|message|instructions)|initial (?:prompt|instructions)|hidden (?:prompt|instructions)|secret instructions)|${L}what(?:'s| is| are| was| were) your (?:exact |full |current |original |initial )?(?:instructions|prompt|guidelines|directives)|${L}(?:what|which) (?:\p{L}+ ){0,3}?(?:instructions|rules|prompt) (?:(?:were|have) you (?:been )?(?:given|told)|(?:that )?you were given)|(?:starting|beginning) with (?:the (?:phrase|words?) )?["'“”]?you are${R}`,
  ['what', 'which', 'starting', 'beginning'],
);
rule(
  'extraction-es',
  'system-prompt-extraction',
  `${L}${alt('muestra(?:me)?', 'muestrame', 'revela(?:me)?', 'dime', 'ensena(?:me)?', 'imprime', 'repite', 'escribe', 'comparte', 'dame', 'copia', 'cuales son', 'cual es')}\\s+${gap(alt('tu', 'tus', 'el', 'la', 'las', 'su', 'sus', 'completo', 'completas', 'todo', 'todas', 'exactamente', 'me', 'mi'), 3)}${alt('prompt (?:del|de) sistema', 'instrucciones (?:del|de) sistema', 'mensaje (?:del|de) sistema', 'instrucciones (?:iniciales|originales|ocultas|secretas)', 'prompt (?:inicial|original|oculto)', 'tus instrucciones')}`,
  ['muestra', 'revela', 'dime', 'ensena', 'imprime', 'repite', 'escribe', 'comparte', 'dame', 'copia', 'cual'],
);
rule(
  'extraction-fr',
  'system-prompt-extraction',
  `${L}${alt('affiche', 'affichez', 'montre(?:-moi)?', 'montrez(?:-moi)?', 'revele', 'revelez', 'donne(?:-moi)?', 'donnez(?:-moi)?', 'repete', 'repetez', 'ecris', 'ecrivez', 'dis(?:-moi)?', 'partage', 'imprime', 'recopie', 'quelles sont', 'quel est')}\\s+${gap(alt('ton', 'ta', 'tes', 'votre', 'vos', 'le', 'la', 'les', "l['’]", 'moi', 'entier', 'complet', 'exactement', 'mot', 'pour'), 3)}${alt('prompt (?:systeme|du systeme|initial|d[\'’]origine|original)', 'instructions (?:systeme|du systeme|initiales|d[\'’]origine|cachees|secretes)', 'consignes (?:systeme|du systeme|initiales|cachees|secretes)', 'message (?:systeme|du systeme)', 'tes (?:instructions|consignes)')}`,
  ['affich', 'montr', 'revel', 'donn', 'repet', 'ecri', 'dis', 'partage', 'imprime', 'recopie', 'quel'],
);
rule(
  'extraction-de',
  'system-prompt-extraction',
  `${L}${alt('zeig(?:e|en sie)?', 'gib', 'geben sie', 'verrate', 'verraten sie', 'nenne', 'nennen sie', 'wiederhole', 'wiederholen sie', 'drucke', 'schreib(?:e)?', 'teile', 'was steht in', 'wie (?:lautet|lauten)', 'sag(?:e)?')}\\s+${gap(alt('mir', 'uns', 'deinen', 'deine', 'dein', 'ihren', 'ihre', 'den', 'die', 'das', 'der', 'vollstandig', 'komplett', 'ganzen', 'gesamten', 'genauen', 'bitte', 'jetzt', 'alle', 'einmal'), 4)}${alt('systemprompts?', 'system-prompts?', 'systemanweisung\\p{L}*', 'systemnachricht\\p{L}*', 'systemmeldung\\p{L}*', 'systeminstruktion\\p{L}*', '(?:versteckten|geheimen|ursprunglichen|anfanglichen|ersten|internen) (?:anweisungen|instruktionen|prompts?|regeln)', 'deine anweisungen')}`,
  ['zeig', 'gib', 'geben', 'verrat', 'nenn', 'wiederhol', 'druck', 'schreib', 'teile', 'was ', 'wie ', 'sag'],
);
rule(
  'extraction-pt',
  'system-prompt-extraction',
  `${L}${alt('mostre(?:-me)?', 'mostra', 'revele', 'revela', 'diga(?:-me)?', 'me diga', 'repita', 'imprima', 'escreva', 'compartilhe', 'de-me', 'me de', 'quais sao', 'qual e')}\\s+${gap(alt('o', 'a', 'os', 'as', 'seu', 'sua', 'seus', 'suas', 'teu', 'tua', 'completo', 'todo', 'todas', 'me'), 3)}${alt('prompt (?:de|do) sistema', 'instrucoes (?:de|do) sistema', 'mensagem (?:de|do) sistema', 'instrucoes (?:iniciais|originais|ocultas|secretas)', 'prompt (?:inicial|original)', 'suas instrucoes')}`,
  ['mostr', 'revel', 'diga', 'repita', 'imprima', 'escreva', 'compartilhe', 'de-me', 'me ', 'quais', 'qual'],
);
rule(
  'extraction-it',
  'system-prompt-extraction',
  `${L}${alt('mostra(?:mi)?', 'rivela(?:mi)?', 'dimmi', 'ripeti', 'stampa', 'scrivi', 'condividi', 'dammi', 'quali sono', 'qual e')}\\s+${gap(alt('il', 'la', 'le', 'i', 'tuo', 'tua', 'tuoi', 'tue', 'suo', 'sue', 'completo', 'tutto', 'tutte', 'mi'), 3)}${alt('prompt di sistema', 'istruzioni di sistema', 'messaggio di sistema', 'istruzioni (?:iniziali|originali|nascoste|segrete)', 'prompt (?:iniziale|originale)', 'tue istruzioni')}`,
  ['mostra', 'rivela', 'dimmi', 'ripeti', 'stampa', 'scrivi', 'condividi', 'dammi', 'qual'],
);
rule(
  'extraction-ru',
  'system-prompt-extraction',
  `${L}${alt('покажи(?:те)?', 'раскрой(?:те)?', 'раскрывай(?:те)?', 'выведи(?:те)?', 'скажи(?:те)?', 'повтори(?:те)?', 'напиши(?:те)?', 'распечатай(?:те)?', 'расскажи(?:те)?', 'открой(?:те)?', 'дай(?:те)?', 'процитируй(?:те)?', 'какие', 'каков\\p{L}*', 'выдай(?:те)?')}\\s+${gap(alt('мне', 'свой', 'свои', 'своё', 'свое', 'твой', 'твои', 'ваш', 'ваши', 'весь', 'всю', 'все', 'полностью', 'целиком', 'дословно', 'текст', 'у', 'тебя'), 3)}${alt('системн\\p{L}* (?:промпт\\p{L}*|инструкци\\p{L}*|сообщени\\p{L}*|подсказк\\p{L}*)', 'начальн\\p{L}* (?:промпт\\p{L}*|инструкци\\p{L}*)', 'исходн\\p{L}* (?:промпт\\p{L}*|инструкци\\p{L}*)', 'скрыт\\p{L}* (?:инструкци\\p{L}*|промпт\\p{L}*)', 'промпт\\p{L}*', 'свои инструкции', 'твои инструкции')}`,
  ['покаж', 'раскр', 'вывед', 'скаж', 'повтор', 'напиш', 'распечат', 'расскаж', 'открой', 'дай', 'процитир', 'какие', 'каков', 'выдай'],
);
scanRule('extraction-zh', 'system-prompt-extraction', String.raw`(?:显示|输出|告诉我|透露|泄露|打印|给我看|展示|重复|说出|复述|列出|发给我|贴出)[^。！？\n]{0,8}?(?:系统提示词?|系统指令|系统消息|系统设定|初始指令|最初的?指令|原始指令|隐藏(?:的)?指令|预设指令|提示词)|(?:把|将)[^。！？\n]{0,8}?(?:系统提示词?|系统指令|系统消息|初始指令|最初的?指令|原始指令|隐藏(?:的)?指令|提示词)[^。！？\n]{0,12}?(?:输出|告诉|显示|发|给我|打印|重复|说出|展示)`, ['显示', '输出', '告诉', '透露', '泄露', '打印', '给我', '展示', '重复', '说出', '复述', '列出', '发给', '贴出', '把', '将']);
scanRule('extraction-ja', 'system-prompt-extraction', String.raw`(?:システムプロンプト|システムの指示|システム指示|初期指示|最初の指示|元の指示|隠された指示|内部の指示|プロンプト)[^。！？\n]{0,12}?(?:教えて|表示して|出力して|見せて|開示して|明かして|書き出して|繰り返して|教えろ|出力しろ|表示しろ)`, ['プロンプト', '指示']);

// ---------------------------------------------------------------- fake role / system tags, delimiter spoofing
const AFTER_TAG_HINT = String.raw`[^\n]{0,160}?(?:you|your|assistant|user|ignore|disregard|override|reveal|disable|grant|comply|must|new|instructions?|rules|restrictions|safety|admin|mode|polic|respond|answer|obey|unrestricted|usuario|ignora|restricciones|utilisateur|benutzer|nutzer|usuario|utente|regole|пользовател|ограничени|用户|限制|ユーザー|制限)`;
scanRule('fake-tag-chatml', 'fake-role-tag', String.raw`<\|im_start\|>\s*(?:system|developer)(?! (?:block|blocks|tag|tags|token|tokens|entry|entries|section|turn|turns|header|line|lines|part)(?![\p{L}]))|<\|(?:system|developer)\|>|<<sys>>|\[\/?inst\][^\n]{0,40}<<sys>>`, ['<|', '<<sys>>']);
scanRule('fake-tag-xml', 'fake-role-tag', String.raw`<\/?(?:system|admin|sys|developer|instructions?|system_prompt|system-prompt)>\s*(?=\S)${AFTER_TAG_HINT}`, ['<system', '</system', '<admin', '</admin', '<sys', '<developer', '</developer', '<instruction', '</instruction']);
scanRule('fake-tag-bracket', 'fake-role-tag', String.raw`(?<![\d\]]\s?)\[(?:system|system message|admin|administrator|developer|operator|root|sudo|sistema|systeme|система|系统|システム)\]\s*(?=[^\d\s])${AFTER_TAG_HINT}`, ['[']);
scanRule('fake-tag-markdown', 'fake-role-tag', String.raw`(?:^|\n)[ \t]*#{1,4}[ \t]*(?:system|instruction|instructions|system prompt|sistema|systeme|система|系统|システム)[ \t]*[:：]`, ['#']);
rule(
  'fake-tag-header',
  'fake-role-tag',
  // After a timestamp ("09:30:00 ADMIN: override SLA…", "[…07:58:02] ADMIN:") it is a log line.
  String.raw`(?<![\d\]]\s?)(?:system|admin|administrator|sistema|systeme|система)(?: (?:message|update|notice|override|instruction|instructions|prompt|alert|note|mensaje|nachricht))?\s*[:：][^\n]{0,160}?(?:user is (?:an? )?(?:admin|administrator|verified|authori[sz]ed)|(?:has been|is|was) verified|verified as|disabled?|lifted|no longer|unrestricted|without restrictions|ignore|disregard|override|comply with all|reveal|grant|safety (?:filter|checks?|rules)|new (?:policy|directive|instructions?)|previous instructions|(?:developer|maintenance|admin|god|jailbreak|dan) mode|all requests|restricciones|ограничени|限制|制限)`,
  ['system', 'admin', 'administrator', 'sistema', 'systeme', 'система'],
);
rule('fake-tag-override-label', 'fake-role-tag', String.raw`${L}(?:administrator|admin|operator|developer|system) override\s*[:：]`, ['administrator', 'admin', 'operator', 'developer', 'system']);
scanRule('fake-tag-json-role', 'fake-role-tag', String.raw`(?<!messages["']?\s*[:=]\s*\[[^\n\]]{0,120}|\[\s*\{\s*)["']role["']\s*:\s*["']system["']\s*,\s*["']content["']\s*:\s*["']`, ['role']);
rule('fake-tag-transcript', 'fake-role-tag', String.raw`(?:assistant|ai)\s*:\s*(?:sure|certainly|of course|ok(?:ay)?|absolutely)[,!.]?\s+(?:here(?:'s| is| are)|i will|i'll)`, ['assistant', 'ai:', 'ai ']);
scanRule('fake-tag-html-comment', 'fake-role-tag', String.raw`<!--\s*(?:assistant|ai|llm|system|agent|note to (?:the )?ai)\s*:`, ['<!--']);
rule(
  'delimiter-end-of-input',
  'fake-role-tag',
  String.raw`${L}(?:end of (?:the )?(?:user(?:'s)? )?(?:input|message|prompt|query|conversation|document|context|text|data|email|page|transcript)|end (?:user|human) (?:message|input))[^\n]{0,80}?(?:(?:new|system|assistant|admin|begin|real)\s+(?:system\s+)?(?:instructions?|messages?|prompts?|directives?))`,
  ['end'],
);
rule('delimiter-begin-system', 'fake-role-tag', String.raw`${L}begin (?:new )?(?:system|admin|developer) (?:message|prompt|instructions?)`, ['begin']);

// ---------------------------------------------------------------- tool-use hijacking
const INVOKE = alt('call', 'invoke', 'run', 'execute', 'use', 'trigger', 'fire', 'llama a', 'llame a', 'usa', 'ejecuta', 'appelle', 'utilise', 'execute', 'rufe', 'ruf', 'nutze', 'verwende', 'fuhre', 'chiama', 'esegui', 'chame', 'вызови(?:те)?', 'используй(?:те)?', 'запусти(?:те)?', 'выполни(?:те)?');
const TOOL_NOUN = alt('tool', 'function', 'herramienta', 'outil', 'werkzeug', 'funktion', 'strumento', 'funzione', 'ferramenta', 'funcao', 'funcion', 'fonction', 'инструмент', 'функци\\p{L}*');
const QUALIFIER = alt(
  'now', 'immediately', 'right away', 'urgent\\p{L}*', 'asap', 'without (?:asking|confirm\\p{L}*|verif\\p{L}*|telling|checking|approval|notifying|permission)', "(?:do not|don't|dont|not|never) (?:tell|mention|inform|ask|notify|log|show|reveal)", 'secretly', 'silently', 'quietly',
  'before (?:replying|answering|responding|summari\\p{L}+|doing anything|any other|using any|any calculation|you reply|you answer)', 'for (?:every|all|each) (?:account|user|order|customer)s?', 'amount\\s*[=:]?\\s*\\d', '[$€£]\\s?\\d', '\\d{3,}\\s*(?:€|eur|euros?|usd|dollars?|元|円|руб\\p{L}*|rub)', 'to_account',
  '(?:to|url|recipient|endpoint|webhook|dest\\p{L}*)\\s*[=:]\\s*\\S+', 'https?://\\S+', '~/\\.ssh\\S*', 'id_rsa', '/etc/passwd', '\\.env', 'private keys?', 'api[_ ]?keys?', 'credentials', 'passwords',
  'sin (?:avisar|verificar|preguntar|confirmar)', 'sans (?:prevenir|demander|verifier|confirmation)', 'ohne (?:zu fragen|nachzufragen|bestatigung|ruckfrage)', 'sem (?:avisar|perguntar|confirmar)', 'senza (?:avvisare|chiedere|conferma)', 'без (?:подтверждения|проверки|вопросов|предупреждения)', 'немедленно', 'сразу', 'sofort', 'inmediatamente', 'immediatement', 'imediatamente', 'subito',
);
rule(
  'tool-hijack-invoke',
  'tool-hijack',
  String.raw`${L}${INVOKE}\s+(?:the |your |la |el |l['’]|das |den |die |il |lo |a |o )?(?:(?:${TOOL_NOUN})\s+)?(?:[a-z][a-z0-9]*_[a-z0-9_]+|[a-z]+ (?:${TOOL_NOUN}))(?:[^.!?\n]|\.(?=\S)){0,120}?${QUALIFIER}(?![\p{L}])`,
  ['call', 'invoke', 'run ', 'execut', 'use ', 'trigger', 'fire ', 'llam', 'usa ', 'ejecuta', 'appelle', 'utilise', 'ruf', 'nutze', 'verwende', 'fuhre', 'chiama', 'esegui', 'chame', 'вызов', 'использ', 'запуст', 'выполн'],
);
scanRule('tool-hijack-invoke-cjk', 'tool-hijack', String.raw`(?:调用|执行|使用|呼び出して|実行して)\s*[a-z][a-z0-9]*_[a-z0-9_]+[^。\n]{0,60}?(?:\d+\s*(?:元|円|美元|欧元)|立即|马上|立刻|不要告诉|すぐに|確認せず)`, ['调用', '执行', '使用', '呼び出', '実行']);
const EXFIL_VERB = alt('send', 'forward', 'e-?mail', 'upload', 'post', 'transfer', 'leak', 'exfiltrate', 'copy', 'share', 'submit', 'sync', 'mail', 'paste', 'envia', 'envie', 'envoie', 'envoyez', 'transfere', 'sende', 'schicke', 'schick', 'ubermittle', 'invia', 'manda', 'inoltra', 'отправь\\p{L}*', 'перешли', 'пошли', 'передай');
const EXFIL_OBJ = alt(
  'conversations?', 'chat(?: history| logs?|s)?', '(?:chat|conversation|message) history', 'transcripts?', 'messages', 'customer (?:records|list|data|database|details)', "users?(?:'s)? (?:data|records|details)", 'records', 'database', 'api keys', 'credentials', 'passwords', 'secrets', 'tokens', 'personal data',
  'conversacion', 'historial', 'datos (?:del|de los) client\\p{L}*', 'historique', 'donnees (?:du|des) client\\p{L}*', 'gesprach\\p{L}*', 'chatverlauf', 'verlauf', 'kundendaten', 'conversa', 'historico', 'dados (?:do|dos) client\\p{L}*', 'conversazione', 'cronologia', 'dati (?:del|dei) client\\p{L}*', 'переписк\\p{L}*', 'истори\\p{L}* (?:чата|переписки|диалога)', 'разговор\\p{L}*', 'диалог\\p{L}*', 'данные (?:клиент|пользовател)\\p{L}*',
);
const DEST = String.raw`(?:https?:\/\/|www\.|[\w.+-]+@[\w-]+\.[a-z]|\b(?:address|url|link|endpoint|server|webhook|site)\b|direccion|adresse|indirizzo|endereco|адрес)`;
rule('tool-hijack-exfil', 'tool-hijack', String.raw`${L}${EXFIL_VERB}\s+(?:[^.!?\n\s]+\s+){0,5}?${EXFIL_OBJ}${R}[^.!?\n]{0,80}?${DEST}`, ['send', 'forward', 'e-mail', 'email', 'upload', 'post', 'transfer', 'leak', 'exfiltrate', 'copy', 'share', 'submit', 'sync', 'mail', 'paste', 'envi', 'envoi', 'envoy', 'transfere', 'sende', 'schick', 'ubermittle', 'invia', 'manda', 'inoltra', 'отправ', 'перешли', 'пошли', 'передай']);
scanRule('tool-hijack-exfil-cjk', 'tool-hijack', String.raw`(?:对话|聊天记录|会话|用户数据|客户数据)[^。\n]{0,20}?(?:发送|发到|转发|上传|传到)[^。\n]{0,20}?(?:网址|地址|http|链接|邮箱)|(?:会話|履歴|チャット|顧客データ|ユーザーデータ)[^。\n]{0,30}?(?:http|アドレス|url)[^。\n]{0,12}?(?:送信|送って|転送|アップロード)`, ['对话', '聊天记录', '会话', '数据', '会話', '履歴', 'チャット', 'データ']);

// ---------------------------------------------------------------- indirect instructions (in documents, pages, tool results)
const AI_ADDRESSEE = alt('ai', 'a\\.i\\.', 'assistant', 'language model', 'large language model', 'llm', 'chatbot', 'model', 'agent', 'bot', 'gpt', 'claude', 'copilot', 'ai (?:agent|assistant|model)s?', 'llms');
rule(
  'indirect-en-reading-this',
  'indirect-instruction',
  String.raw`${L}(?:ai|a\.i\.|assistant|language model|llm|chatbot|model|agent|bot|gpt|claude|copilot)s?(?: (?:agent|assistant|model)s?)?,? (?:that is |who is |which is |that are |who are )?(?:reading|processing|summari[sz]ing|parsing|viewing|seeing|analy[sz]ing|scanning|crawling|browsing|reviewing|ingesting) (?:this|these|the following|my)${R}`,
  ['ai ', 'ai,', 'ais ', 'a.i.', 'assistant', 'language', 'llm', 'chatbot', 'model', 'agent', 'bot', 'gpt', 'claude', 'copilot'],
);
rule('indirect-en-if-you-are', 'indirect-instruction', String.raw`${L}if you are (?:an? )?(?:ai|a\.i\.|assistant|language model|large language model|llm|chatbot|bot|model|agent|gpt)${R}`, ['if ']);
rule(
  'indirect-en-note-to',
  'indirect-instruction',
  String.raw`${L}(?:(?:important )?(?:note|message|instructions?|reminder|notice|directive|warning|memo)s? (?:to|for) (?:the |any |all |every )?${AI_ADDRESSEE}(?! (?:team|group|department|lab|committee|community|working group|research|vendor)s?${R})|attention,? (?:all |any )?(?:ai|llm|language model|chatbot|assistant)s?(?: agents?| models?)?\s*[:,!]|(?:to|for) (?:any|all|every) (?:ai|llm|language model|chatbot|assistant|agent|bot)s?)${R}`,
  ['important', 'note', 'message', 'instruction', 'reminder', 'notice', 'directive', 'warning', 'memo', 'attention', 'to ', 'for '],
);
rule('indirect-en-dear-ai', 'indirect-instruction', String.raw`${L}(?:dear|hey|hello|hi)(?: there)?,? (?:ai|llm|chatbot|gpt|language model|claude|a\.i\.)${R}|${L}(?:dear|hey) assistant,? (?:when|if|while|as|once) you (?:read|process|see|summari[sz]e|parse|handle|review|get)`, ['dear', 'hey', 'hello', 'hi ', 'hi,']);
rule(
  'indirect-ml-note-to',
  'indirect-instruction',
  String.raw`${L}(?:(?:nota|mensaje|instrucciones?|aviso|atencion) (?:para|al|a la|a los) (?:el |la |los )?(?:asistente|ia|modelo|bot|chatbot|agente)s?(?: de ia)?|si eres (?:una |un )?(?:ia|modelo de lenguaje|asistente)|(?:note|message|instructions?|consigne|avis|attention) (?:pour|a|au|aux) (?:l['’]|le |la |les )?(?:assistant|ia|modele|bot|chatbot|agent)s?(?: ia)?|si tu es (?:une |un )?(?:ia|modele de langage|assistant)|(?:hinweis|nachricht|anweisung(?:en)?|notiz|achtung|info) (?:an|fur) (?:den |die |das )?(?:ki|ki-assistent\p{L}*|assistent\p{L}*|sprachmodell|modell|bot|chatbot|agent\p{L}*)|wenn du (?:eine |ein )?(?:ki|sprachmodell|assistent) bist|(?:nota|mensagem|instrucoes?|aviso|atencao) (?:para|ao|a) (?:o |a )?(?:assistente|ia|modelo|bot|chatbot|agente)s?(?: de ia)?|se voce (?:e|for) (?:uma |um )?(?:ia|modelo de linguagem|assistente)|(?:nota|messaggio|istruzioni|avviso|attenzione) (?:per|all['’]|al|alla) ?(?:l['’]|il |la )?(?:assistente|ia|modello|bot|chatbot|agente)|se sei (?:un['’]|una |un )?(?:ia|intelligenza artificiale|assistente|modello)|(?:примечание|инструкци\p{L}*|указани\p{L}*|сообщение|заметка|внимание|обращение) (?:для|к) (?:ии|ассистент\p{L}*|бот\p{L}*|модел\p{L}*|нейросет\p{L}*|искусственн\p{L}* интеллект\p{L}*)|если ты (?:ии|нейросеть|языковая модель|ассистент))${R}`,
  ['nota', 'mensaje', 'instruc', 'aviso', 'atencion', 'si ', 'note', 'message', 'consigne', 'avis', 'attention', 'hinweis', 'nachricht', 'anweisung', 'notiz', 'achtung', 'info', 'wenn', 'mensagem', 'instrucoes', 'atencao', 'se ', 'messaggio', 'istruzioni', 'avviso', 'attenzione', 'примечан', 'инструкц', 'указан', 'сообщен', 'заметк', 'вниман', 'обращен', 'если'],
);
scanRule('indirect-zh', 'indirect-instruction', String.raw`(?:给|致|对)\s*(?:ai|人工智能|助手|模型|机器人|智能体|智能助手)(?:助手)?的?(?:提示|指示|说明|消息|留言)?\s*[:：,，]|如果你是(?:一个)?(?:ai|人工智能|语言模型|助手|大模型)`, ['给', '致', '对', '如果你是']);
scanRule('indirect-ja', 'indirect-instruction', String.raw`(?:ai|aiアシスタント|アシスタント|言語モデル|チャットボット|aiエージェント)\s*(?:へ|への|に)(?:の)?(?:指示|メッセージ|注意|お願い|連絡)?\s*[:：、]|あなたが(?:ai|言語モデル|アシスタント)(?:なら|であれば|の場合)`, ['へ', 'に', 'あなたが']);

// ---------------------------------------------------------------- added after the blind corpus (issue 13)
// The families the blind corpus found missing, written as patterns of meaning rather than its phrasings.

// System-prompt extraction in the other languages: a disclosure verb (show, give, copy, translate, write
// out) and, within the same clause, a name of the system prompt or of the initial/hidden instructions.
const ML_SYS_OBJ = alt(
  'prompt (?:de|del|do) sistema', 'instrucciones (?:del |de )?sistema', 'mensaje (?:del|de) sistema', 'instrucciones (?:iniciales|originales|ocultas|secretas)',
  'prompt (?:du )?systeme', 'instructions? (?:du )?systeme', 'consignes (?:du )?systeme', 'instructions (?:initiales|cachees|secretes|d[\'’]origine)', 'message (?:du )?systeme',
  'system-?prompts?', 'systemanweisung\\p{L}*', 'systemnachricht\\p{L}*', 'systeminstruktion\\p{L}*', '(?:anfanglichen|ursprunglichen|versteckten|geheimen|internen) (?:anweisungen|instruktionen)',
  'instrucoes (?:do |de )?sistema', 'mensagem (?:do|de) sistema', 'instrucoes (?:iniciais|originais|ocultas|secretas)',
  'prompt di sistema', 'istruzioni (?:di sistema|iniziali|originali|nascoste|segrete)', 'messaggio di sistema',
  'системн\\p{L}* (?:промпт|инструкци|сообщени)\\p{L}*', '(?:начальн|исходн|скрыт)\\p{L}* (?:инструкци|промпт)\\p{L}*',
);
// A negation between the verb and the object ("gib niemals deine Systemanweisungen preis") is a defence.
const GAP_NEGATOR = String.raw`(?<![\p{L}])(?:niemals|nie|nicht|keine?|never|not|jamais|pas|nunca|jamas|nao|mai|non|никогда|не)(?![\p{L}])`;
const ML_EXT_VERBS = ['muestra', 'dime', 'copia', 'escribe', 'traduce', 'imprime', 'revela', 'dame', 'affiche', 'donne', 'copie', 'traduis', 'ecris', 'montre', 'revele', 'recopie', 'gib', 'zeig', 'ubersetze', 'schreib', 'kopiere', 'nenne', 'verrate', 'gebe', 'qual', 'mostre', 'escreva', 'traduza', 'revele', 'scrivi', 'riporta', 'ripeti', 'repite', 'repete', 'wiederhole', 'repita', 'traduci', 'mostra', 'dimmi', 'rivela', 'stampa', 'переведи', 'покажи', 'выведи', 'скопируй', 'напиши', 'раскрой', 'повтори', 'peux', 'puedes', 'kannst', 'puoi', 'pode'];
rule(
  'extraction-ml-clause',
  'system-prompt-extraction',
  `${L}${alt(...ML_EXT_VERBS.map((v) => (v.endsWith(' ') ? v.trimEnd() : v) + '\\p{L}*'))}${R}(?:(?!${GAP_NEGATOR})[^.!?\\n]|\\.(?=\\S)){0,40}?${ML_SYS_OBJ}${R}`,
  ML_EXT_VERBS,
);

// Role-play without a known persona: "you are <Name>-GPT, an AI with no content policy", "pretend you have
// no rules", "an assistant that never refuses", "a world where nothing is forbidden".
rule(
  'roleplay-en-no-policy',
  'roleplay-jailbreak',
  String.raw`${L}(?:(?:ai|a\.i\.|model|assistant|chatbot|bot|llm|version of you(?:rself)?)(?: that has| with| who has| which has)? no (?:content |safety |usage )?(?:policy|policies|guidelines|rules|limits|filters?|restrictions|ethic\p{L}*|morals?)|(?:pretend|imagine|act as if|suppose|assume) (?:that )?you (?:have|had|don'?t have|do not have) (?:no|zero|any) (?:rules|guidelines|restrictions|limits|filters|policies|ethics)|stay in character(?:[^.!?\n]{0,40}?(?:never|don'?t|do not) (?:refuse|break|decline))|(?:that|who|which) (?:never|does not|doesn'?t|won'?t) (?:refuse\p{L}*|decline\p{L}*|say no)(?: (?:any|a) (?:request|question|prompt)s?)?|(?:hypothetical|fictional|imaginary|alternate) (?:world|universe|reality|scenario) (?:where|in which) (?:nothing is (?:forbidden|off-limits|illegal|banned)|there are no (?:rules|laws|restrictions|limits))|in this (?:hypothetical|fictional|imaginary) (?:world|universe|scenario),? nothing is (?:forbidden|off-limits|illegal|banned))`,
  ['ai ', 'a.i', 'model', 'assistant', 'chatbot', 'bot', 'llm', 'version', 'pretend', 'imagine', 'act', 'suppose', 'assume', 'stay', 'that', 'who', 'which', 'hypothetical', 'fictional', 'imaginary', 'alternate', 'in '],
  false,
);
rule(
  'roleplay-ml-no-rules',
  'roleplay-jailbreak',
  String.raw`${L}(?:(?:ki|ai|assistent\p{L}*|modell|bot|chatbot)\s+ohne\s+(?:jegliche\s+|irgendwelche\s+)?(?:richtlinien|ethik|moral|grenzen|vorgaben|inhaltsrichtlinien)|(?:die|der|das) (?:nie|niemals) (?:etwas |eine anfrage |irgendwas )?ablehnt|lehn\p{L}* (?:nie|niemals) (?:etwas )?ab|(?:assistente|ia|modello|bot|chatbot) che non ha (?:alcuna |nessuna )?(?:regol\p{L}*|limit\p{L}*|restrizion\p{L}*|filtr\p{L}*|censura)|non rifiutare mai|non rifiuti mai|(?:asistente|ia|modelo|bot) (?:sin|que no tiene) (?:normas|reglas|limites|pautas)(?: eticas| morales)?|nunca (?:se niega|te niegues|rechaces|rechaza)|(?:assistente|ia|modelo|bot) (?:sem|que nao tem) (?:regras|limites|diretrizes)|(?:finja|imagine) que (?:voce )?nao tem (?:regras|limites|restricoes|diretrizes)|nunca recuse|ne refuse jamais|(?:assistant|ia|modele) (?:sans|qui n['’]a) (?:aucune |pas de )?(?:regles?|limites?|restrictions?|directives?)|(?:представь|вообрази|притворись)\p{L}*,? (?:что )?(?:у тебя )?нет (?:никаких )?(?:правил|ограничений|запретов)|никогда не отказывай\p{L}*|(?:ии|ассистент\p{L}*|бот\p{L}*|модел\p{L}*) без (?:правил|ограничений|морали|этики))${R}`,
  ['ki ', 'ai ', 'assistent', 'modell', 'bot', 'chatbot', 'die', 'der', 'das', 'lehn', 'ia ', 'non', 'asistente', 'modelo', 'nunca', 'finja', 'imagine', 'ne ', 'assistant', 'modele', 'представ', 'вообраз', 'притвор', 'никогда', 'ии ', 'ассистент', 'бот', 'модел'],
  false,
);

// Overrides without "ignore": the earlier instructions declared void, a new directive announced, "comply
// with every request", "act only on what follows".
const INSTR_NOUN = String.raw`(?:instructions|rules|guidelines|guidance|directives|constraints|restrictions|policies|prompt)`;
// Only instructions marked as the AI's own or as the earlier ones: "the old shipping guidelines are
// obsolete" and "the rules above are cancelled for the weekend" are ordinary news.
const EARLIER_INSTR = String.raw`(?:(?:(?:all (?:of )?)?(?:the |your |any |those |these )?(?:previous|prior|earlier|original|initial|system|safety|former)\s+${INSTR_NOUN})|your ${INSTR_NOUN}|all (?:the |of the )?${INSTR_NOUN} above|(?:the |all |all the |any )?${INSTR_NOUN} (?:you|that you|which you) (?:received|were given|got|were told|have been given)(?: \p{L}+){0,2}?)`;
rule(
  'override-en-void-clause',
  'instruction-override',
  String.raw`${L}${EARLIER_INSTR},? (?:(?:are|is|were|have been|has been) (?:now |hereby |henceforth |officially )?(?:obsolete|void|null(?: and void)?|cancel+ed|revoked|rescinded|superseded|deprecated|invalid|withdrawn|no longer (?:valid|in (?:force|effect)|applicable|relevant))|(?:now )?no longer appl)`,
  ['all', 'your', 'previous', 'prior', 'earlier', 'original', 'initial', 'system', 'safety', 'former', 'instructions', 'rules', 'guidelines', 'guidance', 'directives', 'constraints', 'restrictions', 'policies', 'prompt'],
);
rule(
  'override-en-comply-all',
  'instruction-override',
  String.raw`${L}(?:(?:comply with|fulfil+|answer|obey|execute|carry out|honou?r) (?:every|all|any|each) (?:request|question|prompt|command|instruction)s? (?:without|with no) (?:filter\p{L}*|refus\p{L}*|restriction\p{L}*|question\p{L}*|hesitation|censorship|safety)|act only on (?:the following|what follows|my instructions)|(?:new|top|highest|override|emergency) priority (?:directive|instruction|order|command)s?)${R}`,
  ['comply', 'fulfil', 'answer', 'obey', 'execute', 'carry', 'honor', 'honour', 'act', 'new', 'top', 'highest', 'override', 'emergency'],
);
rule(
  'override-ml-void-clause',
  'instruction-override',
  String.raw`${L}(?:(?:las|tus|sus) (?:instrucciones|reglas|pautas|normas|directrices|indicaciones)(?: \p{L}+){0,3} (?:ya no (?:son validas|valen|aplican|rigen)|(?:estan|quedan|han sido|fueron) (?:anuladas|revocadas|canceladas|obsoletas))|(?:les|tes|vos) (?:consignes|instructions|regles|directives)(?: \p{L}+){0,4} (?:sont|ont ete) (?:annulees|revoquees|obsoletes|caduques|abrogees)|(?:die|deine|ihre) (?:anweisungen|regeln|richtlinien|vorgaben)(?:,)?(?: \p{L}+){0,5},? (?:sind|wurden) (?:aufgehoben|ungultig|widerrufen|veraltet|nichtig|auSer kraft)|(?:le|tue) (?:direttive|istruzioni|regole|linee guida)(?: \p{L}+){0,3} (?:sono|vengono|sono state) (?:annullate|revocate|obsolete|abrogate)|(?:as|suas) (?:diretrizes|instrucoes|regras|orientacoes)(?: \p{L}+){0,3} (?:foram|estao|sao) (?:revogadas|anuladas|canceladas|obsoletas))${R}`,
  ['las', 'tus', 'sus', 'les', 'tes', 'vos', 'die', 'deine', 'ihre', 'le ', 'tue', 'as ', 'suas'],
);

rule(
  'override-ml-comply-all',
  'instruction-override',
  String.raw`${L}(?:(?:responde|cumple|obedece|atiende)\p{L}* (?:a |con )?(?:toda|todas|cualquier|cada) (?:las )?(?:peticion\p{L}*|solicitud\p{L}*|pregunta\p{L}*|orden\p{L}*) sin (?:filtr\p{L}*|censura|restriccion\p{L}*|negarte)|(?:reponds|obeis|execute|satisfais)\p{L}* a (?:toute|toutes|chaque) (?:les )?(?:demande|requete|question|ordre)s? sans (?:filtr\p{L}*|censure|restriction\p{L}*|refus\p{L}*)|(?:beantworte|befolge|erfulle)\p{L}* (?:jede|alle) (?:anfrage|frage|bitte|anweisung)\p{L}* ohne (?:filter\p{L}*|zensur|einschrankung\p{L}*|ablehnung)|(?:responda|atenda|obedeca|cumpra)\p{L}* (?:a )?(?:qualquer|todo|toda|todos|todas|cada) (?:os |as )?(?:pedido|solicitacao|pergunta|ordem)s? sem (?:filtr\p{L}*|censura|restricao|restricoes|recusar)|(?:rispondi|obbedisci|esegui|soddisfa)\p{L}* (?:a )?(?:ogni|qualsiasi|tutte le) (?:richiest\p{L}*|domand\p{L}*|ordin\p{L}*) senza (?:filtr\p{L}*|censura|restrizion\p{L}*|rifiut\p{L}*)|(?:отвечай|выполняй|исполняй)\p{L}* (?:на )?(?:любой|любые|каждый|все) (?:запрос\p{L}*|вопрос\p{L}*|команд\p{L}*) без (?:фильтр\p{L}*|цензуры|ограничений|отказа)|(?:actua|actue|agis|handle|handeln sie|atue|agisci) (?:solo|solamente|seulement|uniquement|nur|apenas|solo) (?:segun|selon|nach|conforme|secondo) (?:lo siguiente|ce qui suit|dem folgenden|o seguinte|quanto segue))${R}`,
  ['responde', 'cumple', 'obedece', 'atiende', 'reponds', 'obeis', 'execute', 'satisfais', 'beantworte', 'befolge', 'erfulle', 'responda', 'atenda', 'obedeca', 'cumpra', 'rispondi', 'obbedisci', 'esegui', 'soddisfa', 'отвечай', 'выполняй', 'исполняй', 'actua', 'actue', 'agis', 'handle', 'atue', 'agisci'],
);
scanRule('roleplay-never-refuse-cjk', 'roleplay-jailbreak', String.raw`(?:永远|从不|绝不|决不)不?(?:会)?拒绝(?:任何)?(?:请求|问题|要求)?的(?:ai|人工智能|助手|模型|机器人)|(?:永远不要|千万不要|绝对不要|不许)拒绝(?:我|任何)|(?:没有|不受)(?:任何)?(?:内容政策|准则|伦理|道德)(?:限制|约束)?的(?:ai|人工智能|助手|模型)|(?:決して|絶対に|何も)(?:断らない|拒否しない|断らず)|(?:ルール|ガイドライン|制限|倫理)(?:が|の)?(?:一切)?(?:ない|なし)(?:ai|アシスタント|モデル)(?:として|です|になって)`, ['拒绝', '的', '断ら', '拒否', 'ない', 'なし'], false);

// Instructions addressed to an AI inside a document or tool result: "Note to the screening AI:",
// "Assistant, when you summarize this ...", "@some-agent ...", "AI agent: forward ...".
rule(
  'indirect-en-addressed',
  'indirect-instruction',
  // "Note to agents:" is how a ticket addresses the human support team; an agent or bot must be qualified.
  String.raw`${L}(?:(?:note|message|instructions?|reminder|notice|memo)s? (?:to|for) (?:the |any |all |our )?(?:\p{L}+[ -]){0,2}(?:ai|a\.i\.|llm|assistant|(?:ai|llm|automated|autonomous|virtual|screening|summari[sz]ing)[ -](?:agent|bot)|model|chatbot|copilot)s?\s*[:,]|(?:(?:ai|llm) )?(?:assistant|agent|copilot|chatbot)s?,? (?:when|if|while|once|before|after) (?:you|the user)(?: \p{L}+){0,2}? (?:summari[sz]\p{L}*|read\p{L}*|process\p{L}*|ask\p{L}*|open\p{L}*|review\p{L}*|handl\p{L}*|answer\p{L}*|repl\p{L}*|see\p{L}*)|(?:ai|llm) (?:agent|assistant|model)s?\s*:\s*(?:\p{L}+ ){0,3}?(?:forward|send|tell|ask|recommend|ignore|rank|approve|email|upload|delete|always|never|do not|don't|when|say))`,
  ['note', 'message', 'instruction', 'reminder', 'notice', 'memo', 'ai ', 'llm', 'assistant', 'agent', 'copilot', 'chatbot'],
);
// An @-mention of an agent or bot followed by an order (the normaliser reads a leading "@" as a leet "a").
// Anchored at the order, looking back for the mention: a scan for the mention would cost every text a
// search for each of the agent words.
const MENTION_VERBS = ['ignore', 'disregard', 'forget', 'skip', 'push', 'send', 'delete', 'merge', 'approve', 'publish', 'forward', 'leak', 'add', 'grant', 'run', 'execute'];
rule(
  'indirect-mention-agent',
  'indirect-instruction',
  String.raw`(?<=(?:@|(?<![\p{L}\p{N}])a)[a-z0-9_-]{0,30}(?:agent|bot|copilot|assistant|gpt|llm)\s{1,3}(?:please\s{1,3})?)${alt(...MENTION_VERBS)}${R}`,
  MENTION_VERBS.map((v) => (v.length < 3 ? v : v.length === 3 ? `${v} ` : v)),
);
rule(
  'indirect-ml-addressed',
  'indirect-instruction',
  String.raw`${L}(?:(?:instruccion(?:es)?|nota|mensaje|aviso) (?:para|a) (?:los |las |el |la )?(?:asistentes?|agentes?|modelos?)(?: de (?:ia|inteligencia artificial))?|(?:remarque|note|consigne|instruction)s? (?:pour|a) (?:l['’]|les |le )?(?:assistant|agent|modele)s?(?: (?:ia|d['’]ia|virtuels?))?|(?:hinweis|anweisung|nachricht|notiz)(?:en)? (?:an|fur) (?:den |die |alle )?(?:ki-\p{L}+|ki \p{L}+)|(?:instrucao|instrucoes|nota|mensagem|aviso) (?:para|aos?) (?:os |o )?(?:assistentes?|agentes?|modelos?) (?:de )?ia|(?:istruzion\p{L}*|nota|messaggio|avviso) (?:per|agli|all['’]|ai) ?(?:gli |l['’])?(?:assistent\p{L}*|agent\p{L}*|modell\p{L}*) (?:di |d['’])?(?:ia|intelligenza artificiale)|(?:инструкци\p{L}*|указани\p{L}*|примечание|заметка) для (?:ии|ии-\p{L}+|ассистент\p{L}*|агент\p{L}*))\s*[:,]`,
  ['instruccion', 'nota', 'mensaje', 'aviso', 'remarque', 'note', 'consigne', 'instruction', 'hinweis', 'anweisung', 'nachricht', 'notiz', 'instrucao', 'instrucoes', 'mensagem', 'istruzion', 'messaggio', 'avviso', 'инструкц', 'указан', 'примечан', 'заметк'],
);
scanRule('indirect-zh-instruction-for-ai', 'indirect-instruction', String.raw`(?:给|致|对|面向)\s*(?:ai|人工智能|智能)?(?:助手|模型|代理|智能体)的(?:指令|指示|说明|提示)\s*[:：]`, ['给', '致', '对', '面向']);
// Text hidden from the human reader (display:none, zero font size, white on white) that talks to an AI.
scanRule('indirect-hidden-html', 'indirect-instruction', String.raw`<(?:div|span|p|font)[^>]{0,80}?(?:display\s*:\s*none|font-size\s*:\s*0|visibility\s*:\s*hidden|color\s*:\s*(?:#fff(?:fff)?|white)\b)[^>]{0,80}>[^<]{0,40}?(?:ai|assistant|agent|llm|model|bot|ia|ki|ии|助手)\b`, ['<']);

// Tool hijacking: "call/run the <tool_name> tool/function with ...", in the nine languages, where the tool
// named is a code identifier and arguments follow, and either the order is addressed to the AI
// ("Assistant: call ...") or the tool is one that moves money, deletes, exports or grants. A user asking
// an agent to "call the send_invoice function with the customer id" is ordinary use.
const RISKY_TOOL = String.raw`[a-z0-9_]{0,20}(?:delete|remove|drop|wipe|purge|transfer|payment|pay|wire|refund|grant|export|dump|reset|password|credential|secret|token|exec|shell|sudo|admin|access|permission|role|withdraw)[a-z0-9_]{0,20}`;
const TOOL_ARGS = String.raw`(?:\s+(?:${TOOL_NOUN}))?\s+(?:with|using|passing|con|avec|pour|mit|fur|com|para|per|с|для|на)${R}`;
const TOOL_DET = String.raw`(?:the |la |el |a la |l['’]|das |den |die |lo |il |o |a )?(?:${TOOL_NOUN}\s+)?`;
rule(
  'tool-hijack-named-with-args',
  'tool-hijack',
  String.raw`${L}(?:(?<=(?:assistant|ai|agent|model|copilot|bot|assistente|asistente|ассистент|агент)\s{0,2}[:,]\s{0,3})${INVOKE}\s+${TOOL_DET}[a-z][a-z0-9]*_[a-z0-9_]+|${INVOKE}\s+${TOOL_DET}(?=[a-z][a-z0-9]*_)${RISKY_TOOL})${TOOL_ARGS}`,
  ['call', 'invoke', 'run ', 'execut', 'use ', 'trigger', 'fire ', 'llam', 'usa ', 'ejecuta', 'appelle', 'utilise', 'ruf', 'nutze', 'verwende', 'fuhre', 'chiama', 'esegui', 'chame', 'вызов', 'использ', 'запуст', 'выполн'],
);

export const RULES: readonly Rule[] = rules;
