/**
 * Stop words. Written naturally (with accents); the exported sets hold the
 * normalised forms that tokens are compared against. English follows the NLTK
 * list (contraction fragments such as 'don', 'isn' included, since
 * apostrophes split words) plus a few common function words.
 */
import { normalizeText } from './word-tokens.ts';

const EN = `
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself
it its itself they them their theirs themselves what which who whom whose this that these those am is are was were
be been being have has had having do does did doing a an the and but if or because as until while of at by for
with about against between into through during before after above below to from up down in out on off over under
again further then once here there when where why how all any both each few more most other some such no nor not
only own same so than too very s t can will just don should now d ll m o re ve y ain aren couldn didn doesn hadn
hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn would could also might must shall upon
within without onto yet however therefore thus whether either neither via per unto cannot ought let lets
`;

const ES = `
de la que el en y a los del se las por un para con no una su al lo como más pero sus le ya o este sí porque esta
entre cuando muy sin sobre también me hasta hay donde quien quienes desde todo nos durante todos uno les ni contra
otros ese eso ante ellos e esto mí antes algunos qué unos yo otro otras otra él tanto esa estos mucho nada muchos
cual cuales poco ella estar estas algunas algo nosotros nosotras mi mis tú te ti tu tus ellas vosotros vosotras os
mío mía míos mías tuyo tuya tuyos tuyas suyo suya suyos suyas nuestro nuestra nuestros nuestras vuestro vuestra
vuestros vuestras esos esas estoy estás está estamos estáis están esté estén estaba estaban estuvo he has ha hemos
han había habían habrá soy eres es somos sois son era eras éramos eran fui fue fueron ser sea sean sido siendo tengo
tiene tenemos tienen tenía tener tuvo hace hacer cada mismo misma mismos mismas así aquí allí entonces aunque pues
luego tan tal sino según cómo dónde cuándo
`;

const FR = `
au aux avec ce ces dans de des du elle elles en et eux il ils je la le les leur leurs lui ma mais me même mêmes mes
moi mon ne nos notre nous on ou où par pas pour qu que qui quoi sa se ses son sur ta te tes toi ton tu un une vos
votre vous c d j l à m n s t y été étée étées étés étant suis es est sommes êtes sont serai sera serons seront
serais serait seraient étais était étions étaient fus fut ai as avons avez ont aurai aura aurons auront aurais
aurait avais avait avions aviez avaient eu eut ayant cette cet celui celle ceux celles ça cela ceci donc or ni car
si tout tous toute toutes plus moins très aussi bien comme sans sous entre vers chez dont lors alors quand encore
déjà peu autre autres ainsi puis après avant depuis pendant selon
`;

const DE = `
aber alle allem allen aller alles als also am an ander andere anderem anderen anderer anderes auch auf aus bei bin
bis bist da damit dann das dass daß dasselbe dazu dein deine deinem deinen deiner dem den denn der derer des dessen
dich die dies diese diesem diesen dieser dieses dir doch dort du durch ein eine einem einen einer eines einig einige
er es etwas euer eure für gegen gewesen hab habe haben hat hatte hatten hier hin hinter ich ihm ihn ihnen ihr ihre
ihrem ihren ihrer ihres im in indem ins ist jede jedem jeden jeder jedes jene jenem jenen jener jenes jetzt kann
kein keine keinem keinen keiner können könnte man manche mein meine meinem meinen meiner mich mir mit muss musste
nach nicht nichts noch nun nur ob oder ohne sehr sein seine seinem seinen seiner selbst sich sie sind so solche
soll sollte sondern sonst über um und uns unser unsere unter viel vom von vor während war waren warst was weil
welche welchem welchen welcher welches wenn werde werden wie wieder wir wird wirst wo wollen wollte würde würden zu
zum zur zwar zwischen
`;

const PT = `
a à ao aos aquela aquelas aquele aqueles aquilo as até com como da das de dela delas dele deles depois do dos e ela
elas ele eles em entre era eram essa essas esse esses esta estas este estes eu foi foram fosse há isso isto já lhe
lhes mais mas me mesmo mesma meu meus minha minhas muito muitos muita muitas na nas nem no nos nós nossa nossas
nosso nossos num numa o os ou para pela pelas pelo pelos por qual quais quando que quem se sem ser seu seus só sua
suas também te tem têm tinha tu tua tuas um uma umas uns você vocês vos está estão estava estou sou são será seria
ter tenho tive teve havia pode porque onde assim ainda aqui ali cada sobre sob desde durante apenas outro outra
outros outras todo toda todos todas tudo nada algum alguma alguns algumas
`;

function stopWordSet(list: string): ReadonlySet<string> {
  return new Set(
    list
      .split(/\s+/)
      .filter((word) => word !== '')
      .map(normalizeText),
  );
}

export const STOP_WORDS: Record<'en' | 'es' | 'fr' | 'de' | 'pt', ReadonlySet<string>> = {
  en: stopWordSet(EN),
  es: stopWordSet(ES),
  fr: stopWordSet(FR),
  de: stopWordSet(DE),
  pt: stopWordSet(PT),
};
